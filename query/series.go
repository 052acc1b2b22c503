package query

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/lakegate/lakegate/query/sqlbuild"
)

// A time series lists its gaps: the buckets of a series (a group) that
// hold no row, between the range's first and last bucket. A device that
// went silent shows as a gap, not as a series that is merely shorter.
// They are found while the rows stream by (each series comes whole, by
// bucket), bounded in what is kept: the first maxGapRuns runs of
// consecutive empty buckets, and the count of the others. With a fill
// the empty buckets are rows, marked by the statement's hidden column;
// without, a gap is the step between two rows of a series, or before its
// first and after its last.

// maxGapRuns bounds the gap runs a result lists.
const maxGapRuns = 20

// SeriesInfo is what a time series result says of its buckets and gaps.
type SeriesInfo struct {
	// Bucket is the bucket width (chosen from the range when the request
	// gave none); Start and End the range.
	Bucket sqlbuild.Bucket `json:"bucket"`
	Start  time.Time       `json:"start"`
	End    time.Time       `json:"end"`
	// Buckets is the number of buckets of a whole series.
	Buckets int `json:"buckets"`
	// Gaps are the first runs of empty buckets; GapRuns and GapBuckets
	// count all of them in the rows read.
	Gaps       []Gap `json:"gaps"`
	GapRuns    int   `json:"gap_runs"`
	GapBuckets int   `json:"gap_buckets"`
	// Rollup names the rollup that answered the buckets inside the range
	// ("readings 1 hour"); empty: the table's rows answered.
	Rollup string `json:"rollup,omitempty"`
}

// Gap is a run of empty buckets of one series: From and To are the
// starts of its first and last bucket.
type Gap struct {
	Group   []any     `json:"group,omitempty"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Buckets int       `json:"buckets"`
}

// seriesGaps finds a time series' gaps in its rows.
type seriesGaps struct {
	s    *sqlbuild.Series
	info SeriesInfo
	// The series and bucket of the last row (or the row the page starts
	// after); known says there is one, headless that the page skipped rows
	// (a page cut short, continued): the rows before the first are unseen.
	group    []Cell
	groupB   [][]byte
	last     time.Time
	known    bool
	headless bool
	run      *Gap // the open run of filled buckets
}

func newSeriesGaps(s *sqlbuild.Series, from, to time.Time, start pageStart) *seriesGaps {
	g := &seriesGaps{s: s, info: SeriesInfo{Bucket: s.Bucket, Start: from, End: to, Buckets: sqlbuild.BucketsIn(s.Bucket, from, to), Gaps: []Gap{},
		Rollup: s.Rollup}}
	g.group, g.groupB = make([]Cell, s.Groups), make([][]byte, s.Groups)
	g.headless = start.offset > 0
	if !g.headless && len(start.after) == s.Groups+1 {
		// The page follows the row of these keys: the groups, the bucket.
		if t, err := sqlbuild.ParseTime(keyText(start.after[s.Groups])); err == nil {
			for i := range s.Groups {
				g.group[i] = keyCell(start.after[i])
			}
			g.last, g.known = t, true
		}
	}
	return g
}

// row reads one row: its bucket, its series, and whether it is a filled
// gap.
func (g *seriesGaps) row(cells []Cell) {
	b, ok := cellTime(&cells[0])
	if !ok {
		return
	}
	same := g.known && g.sameGroup(cells[1:1+g.s.Groups])
	if !same {
		g.closeRun()
		if g.known && g.s.GapCol < 0 {
			g.gapAfter(g.last) // the end of the series before
		}
		g.setGroup(cells[1 : 1+g.s.Groups])
		if !g.headless && g.s.GapCol < 0 && b.After(g.s.First) {
			g.add(g.s.First, b) // its start
		}
	} else if g.s.GapCol < 0 {
		if next := sqlbuild.NextBucket(g.s.Bucket, g.last); b.After(next) {
			g.add(next, b)
		}
	}
	g.headless = false
	g.last, g.known = b, true
	if g.s.GapCol >= 0 {
		c := &cells[g.s.GapCol]
		if (c.Kind == CellBool || c.Kind == CellInt) && c.I != 0 {
			if g.run == nil {
				g.run = &Gap{From: b}
			}
			g.run.To, g.run.Buckets = b, g.run.Buckets+1
		} else {
			g.closeRun()
		}
	}
}

// end closes the last series of a whole result (not of a page cut at its
// row cap: the rest of that series is the next page's).
func (g *seriesGaps) end(truncated bool) {
	g.closeRun() // the filled buckets of this page
	if truncated {
		return
	}
	switch {
	case g.known && g.s.GapCol < 0:
		g.gapAfter(g.last)
	case !g.known && g.s.Groups == 0 && !g.headless:
		// No row at all: the one series is one gap.
		g.record(Gap{From: g.s.First, To: g.s.Last, Buckets: g.info.Buckets})
	}
}

// gapAfter records the empty buckets after last to the range's end.
func (g *seriesGaps) gapAfter(last time.Time) {
	if next := sqlbuild.NextBucket(g.s.Bucket, last); !next.After(g.s.Last) {
		g.add(next, sqlbuild.NextBucket(g.s.Bucket, g.s.Last))
	}
}

// add records the empty buckets from from up to (not including) to.
func (g *seriesGaps) add(from, to time.Time) {
	n := sqlbuild.BucketsIn(g.s.Bucket, from, to)
	last := from
	if g.s.Bucket.Unit == "month" {
		last = from.AddDate(0, (n-1)*max(g.s.Bucket.Count, 1), 0)
	} else {
		last = sqlbuild.BucketStart(g.s.Bucket, to.Add(-time.Nanosecond))
	}
	g.record(Gap{From: from, To: last, Buckets: n})
}

func (g *seriesGaps) closeRun() {
	if g.run != nil {
		g.record(*g.run)
		g.run = nil
	}
}

// record counts a run, and keeps it while there are few, with its series.
func (g *seriesGaps) record(r Gap) {
	g.info.GapRuns++
	g.info.GapBuckets += r.Buckets
	if len(g.info.Gaps) < maxGapRuns {
		if g.s.Groups > 0 {
			r.Group = make([]any, g.s.Groups)
			for i := range g.group {
				r.Group[i] = cellValue(&g.group[i])
			}
		}
		g.info.Gaps = append(g.info.Gaps, r)
	}
}

func (g *seriesGaps) sameGroup(cells []Cell) bool {
	for i := range cells {
		a, b := &g.group[i], &cells[i]
		if a.Kind != b.Kind || a.I != b.I || a.F != b.F || !bytes.Equal(a.B, b.B) {
			return false
		}
	}
	return true
}

func (g *seriesGaps) setGroup(cells []Cell) {
	for i, c := range cells {
		g.groupB[i] = append(g.groupB[i][:0], c.B...)
		c.B, c.stream = g.groupB[i], nil
		g.group[i] = c
	}
}

// cellTime reads a bucket cell: RFC 3339 text.
func cellTime(c *Cell) (time.Time, bool) {
	if c.Kind != CellText {
		return time.Time{}, false
	}
	t, err := sqlbuild.ParseTime(string(c.B))
	return t.UTC(), err == nil
}

// keyText is a cursor key as text (a bucket is one).
func keyText(v any) string {
	s, _ := v.(string)
	return s
}

// keyCell is a cursor key (as the cursor's JSON decodes it) as the cell a
// row would carry, for comparing series.
func keyCell(v any) Cell {
	switch x := v.(type) {
	case nil:
		return Cell{Kind: CellNull}
	case bool:
		c := Cell{Kind: CellBool}
		if x {
			c.I = 1
		}
		return c
	case string:
		return Cell{Kind: CellText, B: []byte(x)}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return Cell{Kind: CellInt, I: n}
		}
		return Cell{Kind: CellNumber, B: []byte(x)}
	}
	return Cell{Kind: CellText, B: []byte("?")}
}
