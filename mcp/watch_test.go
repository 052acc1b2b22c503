package mcp

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lakegate/lakegate/internal/testutil"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
)

// A watch resource: resources/read answers the newest rows its filters
// keep; a session subscribed to it is told when such rows arrive (and
// not for others), and no more once it unsubscribes.
func TestWatchSubscription(t *testing.T) {
	// 2025-11-25 subscribes with resources/subscribe; 2026-07-28 with a
	// subscriptions/listen stream naming the resource, which go-sdk's
	// Subscribe holds open until Unsubscribe.
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			p, eng := newTestPlugin(t, Options{})
			srv := serveHTTP(t, p)
			updated := make(chan string, 16)
			cs := connectStreamable(t, srv.URL, "alice", version, &mcpsdk.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, req *mcpsdk.ResourceUpdatedNotificationRequest) {
					updated <- req.Params.URI
				}})
			uri := "lakegate://watch/iot/readings?columns=id,device_id&filters=" + url.QueryEscape(`[{"column":"device_id","op":"=","value":7}]`)

			res, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: uri})
			if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, `"next_cursor"`) {
				t.Fatalf("read: %v %v", res, err)
			}
			subscribed := make(chan error, 1)
			go func() {
				subscribed <- cs.Subscribe(context.WithoutCancel(t.Context()), &mcpsdk.SubscribeParams{URI: uri})
			}()
			if version < "2026" {
				if err := <-subscribed; err != nil {
					t.Fatal(err)
				}
			}
			testutil.Eventually(t, 10*time.Second, "the subscription", func() bool { return p.subs.status().Open == 1 })
			insert := func(id, device float64) {
				row := map[string]any{"id": id, "device_id": device, "ts": "2030-01-01T00:00:00Z", "temperature": 1.0, "humidity": 1.0, "status": "ok"}
				if _, err := eng.real.Insert(t.Context(), lakegate.Caller{}, "iot", "readings", []map[string]any{row}); err != nil {
					t.Fatal(err)
				}
			}
			insert(900001, 8) // not the watch's
			insert(900002, 7)
			select {
			case got := <-updated:
				if got != uri {
					t.Errorf("updated %q, want %q", got, uri)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no notifications/resources/updated after a row the watch keeps")
			}
			select {
			case got := <-updated:
				t.Errorf("a second notification (%q) for one row", got)
			case <-time.After(300 * time.Millisecond):
			}
			if err := cs.Unsubscribe(t.Context(), &mcpsdk.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			if version >= "2026" {
				<-subscribed // the listen stream ends
			}
			testutil.Eventually(t, 10*time.Second, "the subscription's end", func() bool { return p.subs.status().Open == 0 })
			insert(900003, 7)
			select {
			case got := <-updated:
				t.Errorf("notified (%q) after unsubscribing", got)
			case <-time.After(500 * time.Millisecond):
			}
		})
	}
}

// A watch read wider than the answer budget is refused, saying how to
// narrow it.
func TestWatchReadBudget(t *testing.T) {
	p, _ := newTestPlugin(t, Options{AnswerChars: 600})
	cs := connectStreamable(t, serveHTTP(t, p).URL, "alice", "2025-11-25", nil)
	_, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://watch/iot/readings"})
	if err == nil || !strings.Contains(err.Error(), "fewer columns") {
		t.Errorf("a read past the budget: %v, want a refusal naming fewer columns", err)
	}
	if _, err := cs.ReadResource(t.Context(), &mcpsdk.ReadResourceParams{URI: "lakegate://watch/iot/readings?columns=id"}); err != nil {
		t.Errorf("a narrow read: %v", err)
	}
}
