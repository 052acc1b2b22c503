package transport

import (
	"testing"
	"testing/synctest"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
)

// A session's tool calls in progress and its last activity, on the exact
// clock of a bubble.
func TestSessionActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sdk := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test"}, nil)
		r := NewSessions(sdk.Sessions, &SessionsOptions{MaxSessions: 10, MaxSessionsPerSubject: 10})
		c := newConn("s1", lakegate.Caller{Subject: "carol"}, 4, 1<<20, time.Second)
		if err := r.addSSE(c); err != nil {
			t.Fatal(err)
		}
		defer r.doneSSE(c)
		opened := time.Now()
		only := func() host.SessionInfo {
			t.Helper()
			list := r.List()
			if len(list) != 1 {
				t.Fatalf("sessions: got %+v, want one", list)
			}
			return list[0]
		}

		time.Sleep(time.Minute)
		first, second := r.Calling("s1"), r.Calling("s1")
		if si := only(); si.Running != 2 || si.Calls != 0 || !si.LastActive.Equal(opened) {
			t.Errorf("two calls running: got running %d, calls %d, last active %v; want 2, 0, %v", si.Running, si.Calls, si.LastActive, opened)
		}
		time.Sleep(10 * time.Second)
		first(100)
		if si := only(); si.Running != 1 || si.Calls != 1 || si.Bytes != 100 || !si.LastActive.Equal(opened.Add(70*time.Second)) {
			t.Errorf("one ended: got running %d, calls %d, bytes %d, last active %v; want 1, 1, 100, opened+70s",
				si.Running, si.Calls, si.Bytes, si.LastActive.Sub(opened))
		}
		time.Sleep(time.Second)
		second(20)
		if si := only(); si.Running != 0 || si.Calls != 2 || si.Bytes != 120 || !si.LastActive.Equal(opened.Add(71*time.Second)) {
			t.Errorf("both ended: got running %d, calls %d, bytes %d, last active %v; want 0, 2, 120, opened+71s",
				si.Running, si.Calls, si.Bytes, si.LastActive.Sub(opened))
		}
		r.Calling("no-such-session")(5) // counts nowhere
		if si := only(); si.Calls != 2 {
			t.Errorf("a call of another session counted here: %d calls", si.Calls)
		}
	})
}
