package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

func TestIngestIdempotencyKey(t *testing.T) {
	st := newStack(t, nil)
	alice, bob := token("alice", lakegate.RoleWriter), token("bob", lakegate.RoleWriter)
	device := func(id string) string {
		return `{"id": ` + id + `, "name": "d` + id + `", "site": "lab", "kind": "probe", "installed": "2024-05-01", "active": true}`
	}
	batch := "[" + device("3001") + ", " + device("3002") + "]"
	before := st.count(t, "devices")

	steps := []struct {
		name, tok, key, body string
		wantCode             int
		wantInserted         int64
		wantReplayed         bool
		wantKind             lakegate.Kind
		wantMsg              string
		wantAdded            int64 // rows added to devices since the start
	}{
		{"first", alice, "b-1", batch, 200, 2, false, "", "", 2},
		{"retry", alice, "b-1", batch, 200, 2, true, "", "", 2},
		{"quoted form", alice, `"b-1"`, batch, 200, 2, true, "", "", 2},
		{"same key other body", alice, "b-1", "[" + device("3003") + "]", 422, 0, false, lakegate.KindValidation, "another body", 2},
		{"same body other subject", bob, "b-1", "[" + device("3004") + "]", 200, 1, false, "", "", 3},
		{"no key inserts", alice, "", "[" + device("3005") + "]", 200, 1, false, "", "", 4},
		{"invalid rows keep the key free", alice, "b-2", "[" + device("1") + "]", 400, 0, false, lakegate.KindValidation, "", 4},
		{"free key", alice, "b-2", "[" + device("3006") + "]", 200, 1, false, "", "", 5},
		{"key with a space", alice, "b 3", "[" + device("3007") + "]", 400, 0, false, lakegate.KindValidation, "Idempotency-Key", 5},
		{"key too long", alice, strings.Repeat("k", query.MaxKeyLen+1), "[" + device("3008") + "]", 400, 0, false, lakegate.KindValidation, "Idempotency-Key", 5},
		{"empty key", alice, `""`, "[" + device("3009") + "]", 400, 0, false, lakegate.KindValidation, "Idempotency-Key", 5},
		{"bad body with a key", alice, "b-4", "[{", 400, 0, false, lakegate.KindValidation, "row 0", 5},
	}
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.key != "" {
				hdr = []string{"Idempotency-Key", tt.key}
			}
			r := st.do(t, "POST", "/data/demo/devices", tt.tok, tt.body, hdr...)
			if r.code != tt.wantCode {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tt.wantCode)
			}
			if tt.wantKind != "" {
				if e := r.errBody(t); e.Error.Kind != tt.wantKind || !strings.Contains(e.Error.Message, tt.wantMsg) {
					t.Errorf("got %+v, want %s mentioning %q", e.Error, tt.wantKind, tt.wantMsg)
				}
			} else {
				var got query.InsertResult
				r.decode(t, &got)
				if got.Inserted != tt.wantInserted || got.Replayed != tt.wantReplayed {
					t.Errorf("got %s, want inserted %d replayed %v", r.body, tt.wantInserted, tt.wantReplayed)
				}
				if h := r.header.Get("Idempotent-Replayed"); (h == "true") != tt.wantReplayed {
					t.Errorf("got Idempotent-Replayed %q, want it only on a replay", h)
				}
			}
			if n := st.count(t, "devices"); n != before+tt.wantAdded {
				t.Errorf("devices: got %d rows, want %d", n, before+tt.wantAdded)
			}
		})
	}

	t.Run("two key headers", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", st.http.URL+"/data/demo/devices", strings.NewReader("["+device("3010")+"]"))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Add("Idempotency-Key", "a")
		req.Header.Add("Idempotency-Key", "b")
		resp, err := st.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("got %d, want 400", resp.StatusCode)
		}
	})
}
