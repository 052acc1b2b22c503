package server

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/testutil"
)

func TestConsolePageAndHeaders(t *testing.T) {
	w := startWired(t, nil)
	page := w.do(t, "GET", "/console", "", "")
	if page.code != http.StatusOK || !strings.Contains(string(page.body), "/console/assets/") {
		t.Fatalf("GET /console without a token: %d %.200s, want the page", page.code, page.body)
	}
	for _, path := range []string{"/console", "/console/assets/index.html"} {
		r := w.do(t, "GET", path, "", "")
		if got := r.header.Get("Content-Security-Policy"); got != consoleCSP || !strings.Contains(got, "script-src 'self';") {
			t.Errorf("%s: CSP %q", path, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, r.header)
		}
	}
	if r := w.do(t, "GET", "/console/assets/nope.js", "", ""); r.code != http.StatusNotFound {
		t.Errorf("unknown asset: %d", r.code)
	}
	// Its data needs a token, like every route.
	if r := w.do(t, "GET", "/console/api/me", "", ""); r.code != http.StatusUnauthorized {
		t.Errorf("/console/api/me without a token: %d", r.code)
	}
	var me struct {
		Subject string   `json:"subject"`
		Roles   []string `json:"roles"`
		Admin   bool     `json:"admin"`
	}
	w.do(t, "GET", "/console/api/me", token("alice", lakegate.RoleReader), "").decode(t, &me)
	if me.Subject != "alice" || len(me.Roles) != 1 || me.Roles[0] != lakegate.RoleReader || me.Admin {
		t.Errorf("me: %+v", me)
	}
}

func TestConsoleOriginCheck(t *testing.T) {
	w := startWired(t, func(c *config.Config) { c.MCPAllowedOrigins = []string{"https://app.example.com"} })
	tok := token("alice", lakegate.RoleReader)
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},                        // not a browser
		{w.base, http.StatusOK},                    // the console itself
		{"https://app.example.com", http.StatusOK}, // allow-listed
		{"https://evil.example", http.StatusForbidden},
	} {
		for _, path := range []string{"/console/api/overview", "/rest/databases"} {
			r := w.do(t, "GET", path, tok, "", "Origin", tc.origin)
			if r.code != tc.want {
				t.Errorf("%s from %q: %d %s, want %d", path, tc.origin, r.code, r.body, tc.want)
			}
		}
	}
	r := w.do(t, "POST", "/rest/sql", tok, sqlJSON(t, "demo", "SELECT 1", 0), "Origin", "https://evil.example")
	if r.code != http.StatusForbidden || r.errBody(t).Error.Kind != lakegate.KindForbidden {
		t.Errorf("cross-site POST /rest/sql: %d %s", r.code, r.body)
	}
}

func TestConsoleOverviewAndSessions(t *testing.T) {
	w := startWired(t, nil)
	admin, reader := token("root", lakegate.RoleAdmin), token("alice", lakegate.RoleReader)
	alice := w.sse(t, reader)
	w.streamable(t, token("bob", lakegate.RoleReader))
	w.streamable(t, token("carol", lakegate.RoleReader))
	w.sse(t, token("carol", lakegate.RoleReader))
	for range 3 {
		if _, err := alice.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"}); err != nil {
			t.Fatal(err)
		}
	}

	var ov overview
	w.do(t, "GET", "/console/api/overview", admin, "").decode(t, &ov)
	last := historyMinutes - 1
	if ov.History.All.Calls[last] < 3 || ov.History.Tools["list_databases"] == nil || ov.History.All.P50MS[last] == nil {
		t.Errorf("history of this minute: %+v", ov.History.All)
	}
	perSubject := map[string]subjectSessions{}
	for _, n := range ov.Sessions.BySubject {
		perSubject[n.Subject] = n
	}
	if perSubject["alice"].SSE != 1 || perSubject["bob"].Streamable != 1 || perSubject["carol"].SSE != 1 || perSubject["carol"].Streamable != 1 {
		t.Errorf("sessions by subject: %+v", ov.Sessions.BySubject)
	}
	if !ov.MCP.Enabled || ov.Sessions.SSE != 2 || ov.Sessions.Streamable != 2 || len(ov.Sessions.BySubject) != 3 ||
		ov.Sessions.Active != 4 || ov.Sessions.Idle != 0 || ov.Sessions.IdleAfterS != 300 || ov.Replica != "" || len(ov.Replicas) != 0 ||
		len(ov.Databases) != 1 || ov.Databases[0].Circuit != "closed" || ov.Workers.Max == 0 {
		t.Errorf("admin's overview: %+v", ov)
	}
	w.do(t, "GET", "/console/api/overview", reader, "").decode(t, &ov)
	if len(ov.Sessions.BySubject) != 1 || ov.Sessions.BySubject[0].Subject != "alice" || ov.Sessions.BySubject[0].SSE != 1 {
		t.Errorf("a reader sees other subjects' sessions: %+v", ov.Sessions.BySubject)
	}

	if r := w.do(t, "GET", "/console/api/overview?replica=0a0b0c0d", admin, ""); r.code != http.StatusNotFound {
		t.Errorf("a replica's view on a single server: %d %s, want 404", r.code, r.body)
	}

	if r := w.do(t, "GET", "/console/api/sessions", reader, ""); r.code != http.StatusForbidden {
		t.Errorf("sessions for a reader: %d", r.code)
	}
	var list struct {
		Sessions []host.SessionInfo `json:"sessions"`
	}
	w.do(t, "GET", "/console/api/sessions", admin, "").decode(t, &list)
	var id string
	for _, si := range list.Sessions {
		if si.Subject == "alice" {
			id = si.ID
			if si.Transport != "sse" || si.Calls != 3 || si.Running != 0 || si.Client != "limits-test 1" {
				t.Errorf("alice's session: %+v", si)
			}
		}
	}
	if len(list.Sessions) != 4 || id == "" {
		t.Fatalf("sessions: %+v", list.Sessions)
	}
	if r := w.do(t, "DELETE", "/console/api/sessions/"+id, reader, ""); r.code != http.StatusForbidden {
		t.Errorf("close by a reader: %d", r.code)
	}
	if r := w.do(t, "DELETE", "/console/api/sessions/"+id, admin, ""); r.code != http.StatusOK {
		t.Fatalf("close: %d %s", r.code, r.body)
	}
	alice.Wait() // the stream ended
	if r := w.do(t, "DELETE", "/console/api/sessions/"+id, admin, ""); r.code != http.StatusNotFound {
		t.Errorf("close again: %d", r.code)
	}
	logs := w.logs.String()
	if !strings.Contains(logs, `"msg":"admin action","action":"close mcp session","subject":"root"`) || !strings.Contains(logs, id) {
		t.Errorf("no admin action log line with the subject and session:\n%s", logs)
	}
	// The admin switch the console uses logs its subject too.
	if r := w.do(t, "POST", "/admin/mcp/disable", admin, ""); r.code != http.StatusOK {
		t.Fatalf("disable: %d", r.code)
	}
	if !strings.Contains(w.logs.String(), `"action":"disable mcp","subject":"root"`) {
		t.Error("no admin action log line for the switch")
	}
}

func TestConsoleDownloadSQL(t *testing.T) {
	w := startWired(t, nil)
	reader := token("alice", lakegate.RoleReader)
	var ticket struct {
		URL string `json:"url"`
	}
	body := `{"sql": {"database": "demo", "sql": "SELECT id, name FROM devices ORDER BY id"}}`
	w.do(t, "POST", "/console/api/downloads", reader, body).decode(t, &ticket)
	if !strings.HasPrefix(ticket.URL, "/console/download/") {
		t.Fatalf("ticket url %q", ticket.URL)
	}
	// The ticket is the credential: no bearer token.
	got := w.do(t, "GET", ticket.URL, "", "")
	if got.code != http.StatusOK || !strings.HasPrefix(got.header.Get("Content-Disposition"), "attachment; filename=demo-") ||
		!strings.HasPrefix(got.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("download: %d %v %.200s", got.code, got.header, got.body)
	}
	rows, err := csv.NewReader(strings.NewReader(string(got.body))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := w.do(t, "POST", "/rest/sql", reader, sqlJSON(t, "demo", "SELECT id, name FROM devices ORDER BY id", 1000))
	var res struct {
		Rows [][]any `json:"rows"`
	}
	want.decode(t, &res)
	if len(rows) != len(res.Rows)+1 || rows[0][0] != "id" || rows[1][1] != res.Rows[0][1] {
		t.Errorf("CSV %d lines (%v), want a header and %d rows (%v)", len(rows), rows[:min(len(rows), 2)], len(res.Rows), res.Rows[:1])
	}
	if r := w.do(t, "GET", ticket.URL, "", ""); r.code != http.StatusNotFound {
		t.Errorf("a ticket used twice: %d", r.code)
	}

	for _, tc := range []struct{ body, kind string }{
		{`{"sql": {"database": "demo", "sql": "DELETE FROM devices"}}`, string(lakegate.KindValidation)},
		{`{"sql": {"database": "demo", "sql": "SELECT 1", "limit": 5}}`, string(lakegate.KindValidation)},
		{`{"transfer": "0123456789abcdef0123456789abcdef"}`, string(lakegate.KindNotFound)},
		{`{}`, string(lakegate.KindValidation)},
	} {
		r := w.do(t, "POST", "/console/api/downloads", reader, tc.body)
		if e := r.errBody(t); string(e.Error.Kind) != tc.kind {
			t.Errorf("%s: %s, want %s", tc.body, r.body, tc.kind)
		}
	}
	var e errorBody
	if err := json.Unmarshal(w.do(t, "GET", "/console/download/forged", "", "").body, &e); err != nil || e.Error.Kind != lakegate.KindNotFound {
		t.Errorf("a forged ticket: %+v %v", e, err)
	}
}

// Idle sessions: no tool call in progress and no activity for
// mcp_session_idle_after. A session whose call is running is active
// however old its last activity; both show in the list and the overview.
func TestConsoleIdleSessions(t *testing.T) {
	w := startWired(t, func(c *config.Config) {
		c.MCPSessionIdleAfter = config.Duration(time.Second)
		c.MCPMaxWorkers, c.WorkerWait = 1, config.Duration(time.Minute)
	})
	admin := token("root", lakegate.RoleAdmin)
	alice := w.sse(t, token("alice", lakegate.RoleReader))
	w.streamable(t, token("bob", lakegate.RoleReader))
	type listed struct {
		Sessions  []sessionView `json:"sessions"`
		IdleAfter float64       `json:"idle_after_s"`
	}
	sessions := func() (out map[string]sessionView, idleAfter float64) {
		var l listed
		w.do(t, "GET", "/console/api/sessions", admin, "").decode(t, &l)
		out = map[string]sessionView{}
		for _, s := range l.Sessions {
			out[s.Subject] = s
		}
		return out, l.IdleAfter
	}

	// Alice's call waits for the one worker, which the test holds.
	release, err := w.limits.MCP().Acquire(lakegate.WithCaller(t.Context(), lakegate.Caller{Subject: "holder"}))
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan error, 1)
	go func() {
		_, err := alice.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "list_databases"})
		called <- err
	}()
	testutil.Eventually(t, 10*time.Second, "alice's call running and bob's session idle", func() bool {
		s, _ := sessions()
		return s["alice"].Running == 1 && s["bob"].Idle
	})
	s, idleAfter := sessions()
	if a := s["alice"]; a.Idle || time.Since(a.LastActive) < time.Second || idleAfter != 1 {
		t.Errorf("alice's session, a call running: %+v (idle after %v s); want active although her last activity is older than 1 s", a, idleAfter)
	}
	var ov overview
	w.do(t, "GET", "/console/api/overview", admin, "").decode(t, &ov)
	bySubject := map[string]subjectSessions{}
	for _, n := range ov.Sessions.BySubject {
		bySubject[n.Subject] = n
	}
	if ov.Sessions.Active != 1 || ov.Sessions.Idle != 1 || ov.Sessions.IdleAfterS != 1 || bySubject["bob"].Idle != 1 || bySubject["alice"].Idle != 0 {
		t.Errorf("overview's sessions: %+v, want alice's active and bob's idle", ov.Sessions)
	}

	release()
	if err := <-called; err != nil {
		t.Fatal(err)
	}
	if a, _ := sessions(); a["alice"].Running != 0 || a["alice"].Calls != 1 {
		t.Errorf("alice's session after her call: %+v, want none running, one done", a["alice"])
	}
	testutil.Eventually(t, 10*time.Second, "alice's session idle a second after her call", func() bool {
		s, _ := sessions()
		return s["alice"].Idle
	})
}
