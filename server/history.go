package server

import (
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
}

// HistoryView is the last hour: the start of each minute (Unix seconds),
// all tools together and each tool.
type HistoryView struct {
	Minutes []int64            `json:"minutes"`
	All     Series             `json:"all"`
	Tools   map[string]*Series `json:"tools"`
}

// view returns the last hour, ending with the current minute.
func (h *history) view() HistoryView {
	now := h.clock().Unix() / 60
	v := HistoryView{Minutes: make([]int64, historyMinutes), All: newSeries(), Tools: map[string]*Series{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range historyMinutes {
		m := now - historyMinutes + 1 + int64(i)
		v.Minutes[i] = m * 60
		slot := &h.ring[m%historyMinutes]
		var all toolMinute
		if slot.minute == m {
			for name, t := range slot.tools {
				s := v.Tools[name]
				if s == nil {
					ns := newSeries()
					s = &ns
					v.Tools[name] = s
				}
				s.set(i, t)
				all.add(t)
			}
		}
		v.All.set(i, &all)
	}
	return v
}

func newSeries() Series {
	return Series{Calls: make([]int64, historyMinutes), Errors: make([]int64, historyMinutes),
		P50MS: make([]*float64, historyMinutes), P95MS: make([]*float64, historyMinutes)}
}

func (s *Series) set(i int, t *toolMinute) {
	s.Calls[i], s.Errors[i] = t.calls, t.errors
	s.P50MS[i], s.P95MS[i] = t.quantileMS(0.5), t.quantileMS(0.95)
}

// quantileMS estimates the q-quantile of the minute's latencies in
// milliseconds as Prometheus's histogram_quantile does: linearly within
// the bucket that holds it, and the highest bound for the slowest bucket.
// It is nil without calls.
func (t *toolMinute) quantileMS(q float64) *float64 {
	if t.calls == 0 {
		return nil
	}
	rank := q * float64(t.calls)
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
