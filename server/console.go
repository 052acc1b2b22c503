package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lakegate/lakegate"
	consolefs "github.com/lakegate/lakegate/console"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/query"
)

// The operator console: its page and assets at /console (open, like
// /health: they hold no data), its JSON routes under /console/api (a
// bearer token, like every other route) and its downloads at
// /console/download/{ticket} (tickets.go). The pages also call the REST
// routes (/rest/...) and the admin switch (/admin/mcp/...).

// consoleCSP lets the page run only its own script and style, talk only to
// this server, and be framed by no one.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// console serves the operator console. It holds what its routes read:
// the engine, the mounted plugin, the cluster and the server's limits and
// metrics; it owns the download tickets. Safe for concurrent use.
type console struct {
	version  string
	engine   *query.Engine
	plugin   *mounted
	replicas Replicas // nil: a single server
	// idleAfter is mcp_session_idle_after (sessionIdle).
	idleAfter time.Duration
	metrics   *Metrics
	limits    *Limits
	log       *slog.Logger
	tickets   tickets
	// base is where a person's browser reaches this server (SQLDownload's
	// links), set by serving.
	base atomic.Pointer[string]
}

// serving sets where a person's browser reaches the server: publicURL,
// else the address it serves on (localhost for an unspecified IP).
func (cs *console) serving(publicURL string, addr net.Addr, tls bool) {
	base := strings.TrimRight(publicURL, "/")
	if base == "" {
		scheme := "http://"
		if tls {
			scheme = "https://"
		}
		host, port, err := net.SplitHostPort(addr.String())
		if err != nil {
			return
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "localhost"
		}
		base = scheme + net.JoinHostPort(host, port)
	}
	cs.base.Store(&base)
}

// mount adds the console's page, assets and downloads to r, and its JSON
// routes to api (authenticated, origin-checked and metered); downloads are
// origin-checked with checkOrigin and metered with meter.
func (cs *console) mount(r *gin.Engine, api *gin.RouterGroup, checkOrigin, meter gin.HandlerFunc) {
	files := http.StripPrefix("/console/assets/", http.FileServerFS(consolefs.Assets()))
	r.GET("/console", consoleHeaders, func(c *gin.Context) {
		http.ServeFileFS(c.Writer, c.Request, consolefs.Assets(), "index.html")
	})
	r.GET("/console/assets/*file", consoleHeaders, gin.WrapH(files))
	r.GET("/console/download/:ticket", checkOrigin, cs.redeemTicket, meter, cs.download)

	api.GET("/me", cs.me)
	api.GET("/overview", cs.overview)
	api.GET("/sessions", requireRole(lakegate.RoleAdmin), cs.sessions)
	api.DELETE("/sessions/:id", requireRole(lakegate.RoleAdmin), cs.closeSession)
	api.GET("/transfers", requireRole(lakegate.RoleReader), cs.transfers)
	api.DELETE("/transfers/:id", requireRole(lakegate.RoleReader), cs.deleteTransfer)
	api.DELETE("/jobs/:id", requireRole(lakegate.RoleReader), cs.cancelJob)
	api.POST("/downloads", requireRole(lakegate.RoleReader), cs.issueTicket)
}

func consoleHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

func (cs *console) me(c *gin.Context) {
	cl := caller(c)
	roles := cl.Roles
	if roles == nil {
		roles = []string{}
	}
	c.JSON(http.StatusOK, gin.H{"subject": cl.Subject, "roles": roles, "admin": cl.HasRole(lakegate.RoleAdmin),
		"version": cs.version, "mcp_enabled": cs.plugin.enabled()})
}

// overview answers the console's overview page (overview.go): in a
// cluster, the cluster's view, or with ?replica=PREFIX that replica's
// (forwarded there); a request from another replica gets this replica's
// own. Sessions by subject and databases are an admin's to see whole;
// others see their own sessions and the databases they may read.
// ?buckets=1 adds the histories' latency histograms.
func (cs *console) overview(c *gin.Context) {
	r := cs.replicas
	buckets := c.Query("buckets") == "1"
	if want := c.Query("replica"); want != "" && (r == nil || want != r.Prefix()) {
		// Another replica's: forwarded there, unless no replica has that
		// prefix (or this request came from another replica already).
		if r != nil && len(want) == len(r.Prefix()) && cs.forward(c, want) {
			return
		}
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such replica",
			Hint: "it may have stopped; GET /console/api/overview without replica lists the cluster's replicas"})
		return
	}
	if r == nil || r.Forwarded(c.Request) || c.Query("replica") != "" {
		c.JSON(http.StatusOK, cs.localOverview(c, buckets))
		return
	}
	parts := []overview{cs.localOverview(c, true)}
	for _, body := range cs.gather(c, "/console/api/overview?buckets=1") {
		var part overview
		if json.Unmarshal(body, &part) == nil && part.Replica != "" {
			parts = append(parts, part)
		}
	}
	c.JSON(http.StatusOK, mergeOverviews(time.Now().UTC(), parts))
}

// localOverview is this server's own overview for the request's caller;
// buckets adds the history's latency histograms.
func (cs *console) localOverview(c *gin.Context, buckets bool) overview {
	cl := caller(c)
	admin := cl.HasRole(lakegate.RoleAdmin)
	st, _ := cs.plugin.status() // without a report: whether it is on
	now := time.Now().UTC()
	ov := overview{Now: now, MCP: mcpState{Enabled: st.Enabled, Since: st.Since},
		Sessions: sessionCounts{Stdio: st.Sessions["stdio"], IdleAfterS: cs.idleAfter.Seconds(), BySubject: []subjectSessions{}},
		Workers:  st.Workers, Blocks: st.Blocks, History: cs.metrics.history.view(buckets)}
	if cs.replicas != nil {
		ov.Replica = cs.replicas.Prefix()
	}
	countSessions(&ov.Sessions, cs.localSessions(), now, cs.idleAfter, func(subject string) bool { return admin || subject == cl.Subject })
	pools := map[string]*poolState{}
	for _, p := range cs.engine.PoolStats() {
		pools[p.Database] = &poolState{Acquired: p.Acquired, Idle: p.Idle, Total: p.Total, Max: p.Max}
	}
	circuits := cs.engine.BreakerStates()
	unserved := cs.engine.Unserved()
	dbs := cs.engine.Databases()
	if !admin {
		dbs = cs.engine.DatabasesFor(cl)
	}
	ov.Databases = make([]databaseState, 0, len(dbs))
	for _, db := range dbs {
		st := databaseState{Name: db.Name, Dialect: db.Dialect, Circuit: string(circuits[db.Name]), Pool: pools[db.Name]}
		if err := unserved[db.Name]; err != nil {
			body := lakegate.NewErrorBody(err)
			st.Unavailable = body.Message + " (" + body.Hint + ")"
		}
		ov.Databases = append(ov.Databases, st)
	}
	return ov
}

func (cs *console) sessions(c *gin.Context) {
	if cs.plugin.sessions == nil {
		fail(c, errLacks("sessions"))
		return
	}
	now := time.Now()
	all := cs.allSessions(c)
	list := make([]sessionView, len(all))
	for i, si := range all {
		list[i] = sessionView{SessionInfo: si, Idle: sessionIdle(si, now, cs.idleAfter)}
	}
	c.JSON(http.StatusOK, gin.H{"sessions": list, "idle_after_s": cs.idleAfter.Seconds()})
}

// sessionView is a session as the console lists it.
type sessionView struct {
	host.SessionInfo
	// Idle is sessionIdle's verdict, by the replica that lists it.
	Idle bool `json:"idle"`
}

// allSessions lists the sessions of this replica and, unless the request
// came from another replica, of every other one.
func (cs *console) allSessions(c *gin.Context) []host.SessionInfo {
	list := cs.localSessions()
	for _, body := range cs.gather(c, "/console/api/sessions") {
		var part struct{ Sessions []host.SessionInfo }
		if json.Unmarshal(body, &part) == nil {
			list = append(list, part.Sessions...)
		}
	}
	slices.SortFunc(list, func(a, b host.SessionInfo) int { return a.Opened.Compare(b.Opened) })
	return list
}

// localSessions lists this replica's sessions: none when the plugin keeps
// none.
func (cs *console) localSessions() []host.SessionInfo {
	if cs.plugin.sessions == nil {
		return nil
	}
	return cs.plugin.sessions.Sessions()
}

// gather is the answers of the other replicas of a cluster to GET path, for
// this request's caller, who shows them its own bearer token; none for a
// single server, a request another replica sent, or a caller with no
// bearer token (a client certificate cannot be passed on: this replica's
// part only, with a warning).
func (cs *console) gather(c *gin.Context, path string) [][]byte {
	r := cs.replicas
	if r == nil || r.Forwarded(c.Request) {
		return nil
	}
	authz := c.GetHeader("Authorization")
	if authz == "" {
		cs.log.WarnContext(c.Request.Context(), "cluster: the other replicas' part is left out: the caller has no bearer token to show them",
			keyRequestID, RequestID(c.Request.Context()), subjectKey, caller(c).Subject, "route", c.FullPath())
		return nil
	}
	return r.Gather(c.Request.Context(), authz, path)
}

// forward hands a request for id to the replica of the cluster that owns
// it, and reports whether it did.
func (cs *console) forward(c *gin.Context, id string) bool {
	if cs.replicas == nil || !cs.replicas.Forward(c.Writer, c.Request, id) {
		return false
	}
	c.Abort()
	return true
}

func (cs *console) closeSession(c *gin.Context) {
	if cs.plugin.sessions == nil {
		fail(c, errLacks("sessions"))
		return
	}
	id := c.Param("id")
	if cs.forward(c, id) {
		return
	}
	if !cs.plugin.sessions.CloseSession(id) {
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such session", Hint: "it may have ended already; see GET /console/api/sessions"})
		return
	}
	adminAction(cs.log, c, "close mcp session", lakegate.LogSessionID, id)
	c.JSON(http.StatusOK, gin.H{"closed": id})
}

func (cs *console) transfers(c *gin.Context) {
	if cs.plugin.transfers == nil {
		fail(c, errLacks("block transfers"))
		return
	}
	list := cs.plugin.transfers.Transfers(caller(c))
	jobs := []host.JobInfo{}
	if cs.plugin.jobs != nil {
		jobs = append(jobs, cs.plugin.jobs.Jobs(caller(c))...)
	}
	for _, body := range cs.gather(c, "/console/api/transfers") {
		var part struct {
			Transfers []host.TransferInfo
			Jobs      []host.JobInfo
		}
		if json.Unmarshal(body, &part) == nil {
			list = append(list, part.Transfers...)
			jobs = append(jobs, part.Jobs...)
		}
	}
	slices.SortFunc(list, func(a, b host.TransferInfo) int { return a.Created.Compare(b.Created) })
	slices.SortFunc(jobs, func(a, b host.JobInfo) int { return b.Created.Compare(a.Created) })
	c.JSON(http.StatusOK, gin.H{"transfers": list, "jobs": jobs})
}

func (cs *console) deleteTransfer(c *gin.Context) {
	if cs.plugin.transfers == nil {
		fail(c, errLacks("block transfers"))
		return
	}
	id := c.Param("id")
	if cs.forward(c, id) {
		return
	}
	if err := cs.plugin.transfers.DeleteTransfer(caller(c), id); err != nil {
		fail(c, err)
		return
	}
	adminAction(cs.log, c, "delete block transfer", "transfer", id)
	c.JSON(http.StatusOK, gin.H{"deleted": id})
}

// cancelJob stops a job of the caller's (an admin: anyone's), on the
// replica that runs it.
func (cs *console) cancelJob(c *gin.Context) {
	if cs.plugin.jobs == nil {
		fail(c, errLacks("jobs"))
		return
	}
	id := c.Param("id")
	if cs.forward(c, id) {
		return
	}
	if err := cs.plugin.jobs.CancelJob(c.Request.Context(), caller(c), id); err != nil {
		fail(c, err)
		return
	}
	adminAction(cs.log, c, "cancel job", "job", id)
	c.JSON(http.StatusOK, gin.H{"cancelled": id})
}

// downloadRequest is the body of POST /console/api/downloads: one of a
// SQL result (as CSV, every row) or a block transfer.
type downloadRequest struct {
	SQL      *query.SQLRequest `json:"sql,omitempty"`
	Transfer string            `json:"transfer,omitempty"`
}

// issueTicket checks a download and issues its ticket: the SQL is
// checked as POST /rest/sql checks it, the transfer must be the caller's
// (or the caller an admin).
func (cs *console) issueTicket(c *gin.Context) {
	raw, err := io.ReadAll(c.Request.Body)
	if err != nil {
		fail(c, err)
		return
	}
	var req downloadRequest
	if err := decodeJSON(bytes.NewReader(raw), &req); err != nil {
		fail(c, err)
		return
	}
	// A transfer of another replica gets its ticket there: the download
	// will be forwarded there by the ticket's prefix.
	if req.Transfer != "" {
		if cs.plugin.transfers == nil {
			fail(c, errLacks("block transfers"))
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(raw))
		if cs.forward(c, req.Transfer) {
			return
		}
	}
	cl := caller(c)
	t := &ticket{caller: cl}
	switch {
	case req.SQL != nil && req.Transfer == "":
		if req.SQL.Cursor != "" || req.SQL.Limit != 0 {
			fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "a download has every row: limit and cursor do not apply",
				Hint: `send {"sql": {"database": "...", "sql": "SELECT ...", "params": [...]}}`})
			return
		}
		if t.sql, err = cs.checkSQLDownload(c.Request.Context(), cl, *req.SQL); err != nil {
			fail(c, err)
			return
		}
	case req.Transfer != "" && req.SQL == nil:
		mine := cs.plugin.transfers.Transfers(cl)
		i := slices.IndexFunc(mine, func(ti host.TransferInfo) bool { return ti.ID == req.Transfer })
		if i < 0 {
			fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such transfer",
				Hint: "transfers expire after a while and can be read only by the subject that made them"})
			return
		}
		t.transfer, t.format = req.Transfer, mine[i].Format
	default:
		fail(c, &lakegate.Error{Kind: lakegate.KindValidation, Message: "give either sql or transfer",
			Hint: `send {"sql": {"database": "...", "sql": "SELECT ..."}} or {"transfer": "ID"}`})
		return
	}
	path, err := cs.issue(t)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"url": path, "expires": t.expires.UTC()})
}

// checkSQLDownload checks r for cl as POST /rest/sql would, for every row.
func (cs *console) checkSQLDownload(ctx context.Context, cl lakegate.Caller, r query.SQLRequest) (*query.SQLRequest, error) {
	r.Limit, r.Cursor = query.NoLimit, ""
	if _, err := cs.engine.PrepareSQL(ctx, cl, r); err != nil {
		return nil, err
	}
	return &r, nil
}

// issue stores t and returns the path of its download.
func (cs *console) issue(t *ticket) (string, error) {
	prefix := ""
	if cs.replicas != nil {
		prefix = cs.replicas.Prefix()
	}
	name, err := cs.tickets.issue(t, prefix, time.Now())
	if err != nil {
		return "", err
	}
	return "/console/download/" + name, nil
}

// SQLDownload is host.Downloads: a ticket for the CSV of every row of a
// statement, as the console's own downloads, at an absolute URL (the
// person's browser opens it): public_url, else the address the server
// listens on.
func (cs *console) SQLDownload(ctx context.Context, c lakegate.Caller, database, sql string, params []any) (string, time.Time, error) {
	r, err := cs.checkSQLDownload(ctx, c, query.SQLRequest{Database: database, SQL: sql, Params: params})
	if err != nil {
		return "", time.Time{}, err
	}
	t := &ticket{caller: c, sql: r}
	path, err := cs.issue(t)
	if err != nil {
		return "", time.Time{}, err
	}
	base := cs.base.Load()
	if base == nil {
		return "", time.Time{}, &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the server is not serving yet"}
	}
	return *base + path, t.expires.UTC(), nil
}

// redeemTicket makes the ticket's caller the request's, or refuses.
func (cs *console) redeemTicket(c *gin.Context) {
	if cs.forward(c, c.Param("ticket")) {
		return // issued by another replica
	}
	t, ok := cs.tickets.redeem(c.Param("ticket"), time.Now())
	if !ok {
		fail(c, &lakegate.Error{Kind: lakegate.KindNotFound, Message: "no such download: it was used already, or it expired",
			Hint: "start the download again from the console"})
		return
	}
	c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), t.caller))
	c.Set(subjectKey, t.caller.Subject)
	c.Set(ticketKey, t)
}

const ticketKey = "lakegate.ticket"

// download streams a ticket's file: a transfer as the block route
// /mcp/blocks/{id}/all does, a SQL result as POST /rest/sql with format
// csv does, in a worker slot.
func (cs *console) download(c *gin.Context) {
	t := c.MustGet(ticketKey).(*ticket)
	if t.transfer != "" {
		c.Header("Content-Disposition", attachment("transfer-"+t.transfer+"."+t.format))
		if err := cs.plugin.transfers.ServeTransfer(c.Writer, c.Request, t.caller, t.transfer); err != nil {
			fail(c, err)
		}
		return
	}
	release, err := cs.limits.admit(c.Request.Context(), t.caller.Subject, workREST)
	if err != nil {
		fail(c, err)
		return
	}
	defer release()
	st, err := cs.engine.PrepareSQL(c.Request.Context(), t.caller, *t.sql)
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Content-Disposition", attachment(t.sql.Database+"-"+time.Now().UTC().Format("20060102-150405")+".csv"))
	streamResult(c, cs.log, st, query.FormatCSV)
	cs.metrics.returned(workREST, int64(c.GetInt(rowsKey)), int64(max(c.Writer.Size(), 0)))
}

// attachment is a Content-Disposition that saves the body as file name.
func attachment(name string) string {
	return mime.FormatMediaType("attachment", map[string]string{"filename": name})
}
