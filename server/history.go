package server

import (
	"slices"
	"sync"
	"time"
)

// historyMinutes is how far back the console's charts reach.
const historyMinutes = 60

// history keeps the last hour of tool calls in one bucket a minute, for
// the console's charts: calls, errors and a latency histogram (the
// buckets of lakegate_mcp_tool_call_duration_seconds) per tool. It is
// bounded by the minutes and the tools. Safe for concurrent use.
type history struct {
	now func() time.Time

	mu   sync.Mutex
	ring [historyMinutes]minuteStats
}

type minuteStats struct {
	minute int64 // Unix time / 60; the slot is stale when it is not now's
	tools  map[string]*toolMinute
}

type toolMinute struct {
	calls, errors int64
	// buckets[i] counts calls of at most durationBuckets[i] seconds (and
	// more than the one before); the last counts the slower ones.
	buckets [len(durationBuckets) + 1]int64
}

func (t *toolMinute) add(o *toolMinute) {
	t.calls += o.calls
	t.errors += o.errors
	for i, n := range o.buckets {
		t.buckets[i] += n
	}
}

// record counts one finished tool call.
func (h *history) record(tool string, failed bool, d time.Duration) {
	m := h.clock().Unix() / 60
	sec := d.Seconds()
	b := len(durationBuckets)
	for i, le := range durationBuckets {
		if sec <= le {
			b = i
			break
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	slot := &h.ring[m%historyMinutes]
	if slot.minute != m || slot.tools == nil {
		slot.minute = m
		slot.tools = map[string]*toolMinute{}
	}
	t := slot.tools[tool]
	if t == nil {
		t = &toolMinute{}
		slot.tools[tool] = t
	}
	t.calls++
	if failed {
		t.errors++
	}
	t.buckets[b]++
}

func (h *history) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// Series is one line of the console's charts: a value a minute, oldest
// first. A latency is null for a minute without calls.
type Series struct {
	Calls  []int64    `json:"calls"`
	Errors []int64    `json:"errors"`
	P50MS  []*float64 `json:"p50_ms"`
	P95MS  []*float64 `json:"p95_ms"`
	// Buckets, when asked for, are each minute's latency histogram: the
	// calls of at most each bound of
	// lakegate_mcp_tool_call_duration_seconds, then the slower ones (not
	// cumulative); null for a minute without calls. Histograms add up
	// across replicas, quantiles do not (mergeHistories).
	Buckets [][]int64 `json:"buckets,omitempty"`
}

// HistoryView is the last hour: the start of each minute (Unix seconds),
// all tools together and each tool.
type HistoryView struct {
	Minutes []int64            `json:"minutes"`
	All     Series             `json:"all"`
	Tools   map[string]*Series `json:"tools"`
}

// view returns the last hour, ending with the current minute; buckets
// adds each series' histograms.
func (h *history) view(buckets bool) HistoryView {
	h.mu.Lock()
	defer h.mu.Unlock()
	return renderHistory(h.clock().Unix()/60, buckets, func(m int64) map[string]*toolMinute {
		if slot := &h.ring[m%historyMinutes]; slot.minute == m {
			return slot.tools
		}
		return nil
	})
}

// mergeHistories adds up histories of several replicas, minute by minute
// (Unix minutes: the replicas' clocks agree on them), into the hour
// ending with the minute of now. The latencies come from the added
// histograms (their Buckets), as Prometheus's histogram_quantile over a
// sum: a part without them adds its calls and errors only.
func mergeHistories(now time.Time, parts []HistoryView) HistoryView {
	minutes := map[int64]map[string]*toolMinute{}
	for _, p := range parts {
		for name, s := range p.Tools {
			for i, start := range p.Minutes {
				if i >= len(s.Calls) || i >= len(s.Errors) || s.Calls[i] == 0 {
					continue
				}
				tools := minutes[start/60]
				if tools == nil {
					tools = map[string]*toolMinute{}
					minutes[start/60] = tools
				}
				t := tools[name]
				if t == nil {
					t = &toolMinute{}
					tools[name] = t
				}
				t.calls += s.Calls[i]
				t.errors += s.Errors[i]
				if i < len(s.Buckets) && len(s.Buckets[i]) == len(t.buckets) {
					for j, n := range s.Buckets[i] {
						t.buckets[j] += n
					}
				}
			}
		}
	}
	return renderHistory(now.Unix()/60, false, func(m int64) map[string]*toolMinute { return minutes[m] })
}

// renderHistory is the hour ending with minute now (Unix time / 60), from
// each minute's tools.
func renderHistory(now int64, buckets bool, minute func(m int64) map[string]*toolMinute) HistoryView {
	v := HistoryView{Minutes: make([]int64, historyMinutes), All: newSeries(buckets), Tools: map[string]*Series{}}
	for i := range historyMinutes {
		m := now - historyMinutes + 1 + int64(i)
		v.Minutes[i] = m * 60
		var all toolMinute
		for name, t := range minute(m) {
			s := v.Tools[name]
			if s == nil {
				ns := newSeries(buckets)
				s = &ns
				v.Tools[name] = s
			}
			s.set(i, t)
			all.add(t)
		}
		v.All.set(i, &all)
	}
	return v
}

func newSeries(buckets bool) Series {
	s := Series{Calls: make([]int64, historyMinutes), Errors: make([]int64, historyMinutes),
		P50MS: make([]*float64, historyMinutes), P95MS: make([]*float64, historyMinutes)}
	if buckets {
		s.Buckets = make([][]int64, historyMinutes)
	}
	return s
}

func (s *Series) set(i int, t *toolMinute) {
	s.Calls[i], s.Errors[i] = t.calls, t.errors
	s.P50MS[i], s.P95MS[i] = t.quantileMS(0.5), t.quantileMS(0.95)
	if s.Buckets != nil && t.calls > 0 {
		s.Buckets[i] = slices.Clone(t.buckets[:])
	}
}

// quantileMS estimates the q-quantile of the minute's latencies in
// milliseconds as Prometheus's histogram_quantile does: linearly within
// the bucket that holds it, and the highest bound for the slowest bucket.
// It is nil without calls in the buckets.
func (t *toolMinute) quantileMS(q float64) *float64 {
	var total int64
	for _, n := range t.buckets {
		total += n
	}
	if total == 0 {
		return nil
	}
	rank := q * float64(total)
	var seen int64
	for i, n := range t.buckets {
		if n == 0 || float64(seen+n) < rank {
			seen += n
			continue
		}
		var ms float64
		switch {
		case i == len(durationBuckets):
			ms = durationBuckets[i-1] * 1000
		default:
			lo := 0.0
			if i > 0 {
				lo = durationBuckets[i-1]
			}
			hi := durationBuckets[i]
			ms = (lo + (hi-lo)*(rank-float64(seen))/float64(n)) * 1000
		}
		return &ms
	}
	ms := durationBuckets[len(durationBuckets)-1] * 1000
	return &ms
}
