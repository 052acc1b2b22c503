package transport

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// taskCreated puts the task in the place of a marked result, in a JSON
// reply and in an event stream, keeping the id as written and passing
// every other message, and a reply past its bound, on unread.
func TestTaskCreated(t *testing.T) {
	created := func(id string) (any, error) {
		if id != "j1" {
			return nil, errors.New("no task " + id)
		}
		return map[string]string{"resultType": "task", "taskId": id, "status": "working"}, nil
	}
	marked := `{"jsonrpc":"2.0","id":1.50,"result":{"content":[],"_meta":{"lakegate/task":"j1"}}}`
	plain := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"lakegate/task"}]}}`
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	for _, tc := range []struct {
		name, ct, body string
		want, not      []string
	}{
		{"json", "application/json", marked, []string{`"id":1.50`, `"taskId":"j1"`, `"resultType":"task"`}, []string{"_meta"}},
		{"json unmarked", "application/json", plain, []string{plain}, nil},
		{"stream", "text/event-stream", "event: message\ndata: " + progress + "\n\nevent: message\ndata: " + marked + "\n\n",
			[]string{"data: " + progress + "\n\n", `"id":1.50`, `"taskId":"j1"`}, []string{"_meta"}},
		{"gone", "application/json", strings.Replace(marked, "j1", "j2", 1), []string{`"error"`, "no task j2"}, []string{`"result"`}},
		{"large", "application/json", marked + strings.Repeat(" ", maxTaskCreated), []string{`"_meta":{"lakegate/task":"j1"}`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &taskCreated{ResponseWriter: rec, created: created}
			w.Header().Set("Content-Type", tc.ct)
			w.WriteHeader(http.StatusOK)
			// Written in pieces, as a handler may.
			for b := []byte(tc.body); len(b) > 0; {
				n := min(len(b), 7)
				if _, err := w.Write(b[:n]); err != nil {
					t.Fatal(err)
				}
				b = b[n:]
			}
			w.flush()
			got := rec.Body.String()
			for _, s := range tc.want {
				if !strings.Contains(got, s) {
					t.Errorf("reply %q lacks %q", got, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(got, s) {
					t.Errorf("reply %q has %q", got, s)
				}
			}
		})
	}
}
