package server

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHistoryMinutes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0) // a minute's start: 30,000,000 minutes
	h := &history{now: func() time.Time { return now }}
	for range 9 {
		h.record("run_sql", false, 2*time.Millisecond) // bucket (1, 2.5] ms
	}
	h.record("run_sql", true, 40*time.Millisecond) // (25, 50] ms
	h.record("query", false, 10*time.Minute)       // slower than the last bound
	now = now.Add(time.Minute)
	h.record("run_sql", false, time.Millisecond)

	v := h.view(false)
	if len(v.Minutes) != historyMinutes || v.Minutes[historyMinutes-1] != now.Unix() || v.Minutes[historyMinutes-2] != now.Unix()-60 {
		t.Fatalf("minutes end %v, want ... %d %d", v.Minutes[historyMinutes-2:], now.Unix()-60, now.Unix())
	}
	sql := v.Tools["run_sql"]
	if sql == nil || sql.Calls[historyMinutes-2] != 10 || sql.Errors[historyMinutes-2] != 1 || sql.Calls[historyMinutes-1] != 1 {
		t.Fatalf("run_sql: %+v", sql)
	}
	if got := v.All.Calls[historyMinutes-2]; got != 11 {
		t.Errorf("all calls: got %d, want 11", got)
	}
	// p50 of run_sql's ten: rank 5 of 9 in (1, 2.5] ms: 1 + 1.5*5/9.
	if p := sql.P50MS[historyMinutes-2]; p == nil || *p < 1.83 || *p > 1.84 {
		t.Errorf("p50: got %v, want 1.83 ms", deref(p))
	}
	// p95: rank 9.5, past the nine: in (25, 50] ms, halfway.
	if p := sql.P95MS[historyMinutes-2]; p == nil || math.Abs(*p-37.5) > 1e-9 {
		t.Errorf("p95: got %v, want 37.5 ms", deref(p))
	}
	if p := v.Tools["query"].P50MS[historyMinutes-2]; p == nil || *p != 300_000 {
		t.Errorf("a call past the last bound: got %v, want the last bound, 300000 ms", deref(p))
	}
	if v.All.P50MS[0] != nil || v.Tools["query"].P50MS[historyMinutes-1] != nil {
		t.Error("a minute without calls has a latency; want null")
	}

	// An hour later the old minutes are gone, their slots reused.
	now = now.Add(historyMinutes * time.Minute)
	h.record("run_sql", false, time.Millisecond)
	v = h.view(false)
	var total int64
	for _, n := range v.All.Calls {
		total += n
	}
	if total != 1 {
		t.Errorf("an hour later: %d calls in the window, want 1", total)
	}
}

// Replicas' histories add up to the history of all their calls: counts
// and latencies alike (from the added histograms, never from quantiles).
func TestMergeHistories(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	one, two, all := &history{now: clock}, &history{now: clock}, &history{now: clock}
	record := func(h *history, tool string, failed bool, d time.Duration) {
		h.record(tool, failed, d)
		all.record(tool, failed, d)
	}
	for range 9 {
		record(one, "run_sql", false, 2*time.Millisecond)
	}
	record(two, "run_sql", true, 40*time.Millisecond)
	record(two, "query", false, 10*time.Minute)
	now = now.Add(time.Minute)
	record(one, "run_sql", false, time.Millisecond)
	record(two, "describe", false, 300*time.Millisecond)

	got := mergeHistories(now, []HistoryView{one.view(true), two.view(true)})
	if want := all.view(false); !reflect.DeepEqual(got, want) {
		t.Errorf("merged:\n got %s\nwant %s", jsonText(t, got), jsonText(t, want))
	}
	// p95 of run_sql's ten calls of the minute before: 37.5 ms, which
	// neither replica's own p95 (2.4 ms, 49 ms) says.
	if p := got.Tools["run_sql"].P95MS[historyMinutes-2]; p == nil || math.Abs(*p-37.5) > 1e-9 {
		t.Errorf("merged p95: got %v, want 37.5 ms", deref(p))
	}
	// A part without histograms adds its counts, not its latencies.
	got = mergeHistories(now, []HistoryView{one.view(false), two.view(true)})
	if n := got.Tools["run_sql"].Calls[historyMinutes-2]; n != 10 {
		t.Errorf("calls with a part lacking histograms: got %d, want 10", n)
	}
	if p := got.Tools["run_sql"].P50MS[historyMinutes-2]; p == nil || math.Abs(*p-37.5) > 1e-9 {
		t.Errorf("p50 with a part lacking histograms: got %v, want 37.5 ms (the other part's one call)", deref(p))
	}
	if p := got.Tools["run_sql"].P50MS[historyMinutes-1]; p != nil {
		t.Errorf("p50 of a minute whose calls came without histograms: got %v, want null", *p)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestTickets(t *testing.T) {
	var ts tickets
	now := time.Now()
	alice := &ticket{transfer: "x"}
	alice.caller.Subject = "alice"
	name, err := ts.issue(alice, "", now)
	if err != nil || len(name) < 40 {
		t.Fatalf("issue: %q, %v", name, err)
	}
	if _, ok := ts.redeem("nope", now); ok {
		t.Error("an unknown ticket was redeemed")
	}
	if got, ok := ts.redeem(name, now); !ok || got != alice {
		t.Fatalf("redeem: %v %v", got, ok)
	}
	if _, ok := ts.redeem(name, now); ok {
		t.Error("a ticket was redeemed twice")
	}
	if named, _ := ts.issue(&ticket{}, "0a0b0c0d", now); !strings.HasPrefix(named, "0a0b0c0d") {
		t.Errorf("a replica's ticket %q does not begin with its prefix", named)
	}
	late, _ := ts.issue(&ticket{}, "", now)
	if _, ok := ts.redeem(late, now.Add(ticketTTL)); ok {
		t.Error("an expired ticket was redeemed")
	}
	// One subject's cap; expired tickets do not count.
	for i := range maxTicketsPerSubject {
		if _, err := ts.issue(&ticket{caller: alice.caller}, "", now); err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
	}
	if _, err := ts.issue(&ticket{caller: alice.caller}, "", now); err == nil {
		t.Error("past the per-subject cap: issued")
	}
	if _, err := ts.issue(&ticket{caller: alice.caller}, "", now.Add(ticketTTL)); err != nil {
		t.Errorf("once the others expired: %v", err)
	}
}
