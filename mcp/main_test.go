package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// fakeEngine serves a fixed catalog (so tests can change it) and records
// who called; statements run on a real SQLite engine. Slow SQL (sql ==
// "slow") blocks until its context ends; slowStarted and slowEnded (with
// the context's error) tell of it, when there is room.
type fakeEngine struct {
	real        *query.Engine
	mu          sync.Mutex
	tables      map[string][]string
	callers     []string
	slowStarted chan struct{}
	slowEnded   chan error
}

var _ Engine = (*fakeEngine)(nil)

func newFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.db")
	if err := query.CreateDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	real, err := query.Open(t.Context(), []config.Database{{Name: "iot", URL: "sqlite:" + path}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close(context.Background()) })
	return &fakeEngine{real: real, tables: map[string][]string{"iot": {"devices", "readings"}, "shop": {"orders"}},
		slowStarted: make(chan struct{}, 8), slowEnded: make(chan error, 8)}
}

func (f *fakeEngine) record(c lakegate.Caller) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callers = append(f.callers, c.Subject)
}

// lastCaller is the subject of the latest engine call.
func (f *fakeEngine) lastCaller() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.callers) == 0 {
		return ""
	}
	return f.callers[len(f.callers)-1]
}

func (f *fakeEngine) setTables(db string, tables ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tables[db] = tables
}

func (f *fakeEngine) Databases() []query.Database {
	return []query.Database{{Name: "iot", Dialect: "postgres"}, {Name: "shop", Dialect: "sqlite"}}
}

func (f *fakeEngine) Tables(_ context.Context, c lakegate.Caller, db string) ([]query.Table, error) {
	if c.Subject != catalogCaller.Subject {
		f.record(c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	names, ok := f.tables[db]
	if !ok {
		return nil, lakegate.Errorf(lakegate.KindNotFound, "unknown database %q", db)
	}
	var out []query.Table
	for _, n := range names {
		out = append(out, query.Table{Name: n, Kind: "table", RowEstimate: 10})
	}
	return out, nil
}

func (f *fakeEngine) Describe(ctx context.Context, c lakegate.Caller, db, table string) (*query.Table, error) {
	f.record(c)
	tables, err := f.Tables(ctx, catalogCaller, db)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if t.Name == table {
			t.Columns = []query.Column{{Name: "id", Type: "bigint"}}
			return &t, nil
		}
	}
	return nil, lakegate.Errorf(lakegate.KindNotFound, "unknown table %q", table)
}

// PrepareQuery and PrepareSQL run on a real engine over the embedded demo
// database (SQLite), named "iot".
func (f *fakeEngine) PrepareQuery(ctx context.Context, c lakegate.Caller, r query.Request) (*query.Stmt, error) {
	f.record(c)
	return f.real.PrepareQuery(ctx, c, r)
}

func (f *fakeEngine) PrepareSQL(ctx context.Context, c lakegate.Caller, r query.SQLRequest) (*query.Stmt, error) {
	f.record(c)
	if r.SQL == "slow" {
		select {
		case f.slowStarted <- struct{}{}:
		default:
		}
		<-ctx.Done()
		select {
		case f.slowEnded <- ctx.Err():
		default:
		}
		return nil, ctx.Err()
	}
	return f.real.PrepareSQL(ctx, c, r)
}

// newTestPlugin builds a plugin on a fake engine; Close runs at cleanup.
func newTestPlugin(t *testing.T, opts Options) (*Plugin, *fakeEngine) {
	t.Helper()
	eng := newFakeEngine(t)
	opts.Tools = lakegate.DefaultTools
	opts.Enabled = true
	p, err := New(eng, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p, eng
}

// serveHTTP serves p's router (testRouter) on a loopback port.
func serveHTTP(t *testing.T, p *Plugin) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(testRouter(p))
	t.Cleanup(srv.Close)
	return srv
}

// asSubject adds the stand-in auth header (and a bearer, which the SDK's
// token middleware wants to see) to every request.
type asSubject struct {
	sub    string
	origin string
}

func (a asSubject) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Sub", a.sub)
	r.Header.Set("Authorization", "Bearer test")
	if a.origin != "" {
		r.Header.Set("Origin", a.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func clientFor(sub string) *http.Client { return &http.Client{Transport: asSubject{sub: sub}} }

// connectStreamable opens a go-sdk client session on /mcp as sub.
func connectStreamable(t *testing.T, base, sub, version string, copts *mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts)
	cs, err := client.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: clientFor(sub), MaxRetries: -1,
	}, &mcpsdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// testRouter mounts p on a bare router behind a stand-in for the host's
// auth: the X-Sub header names the caller, a reader (an admin when the
// name begins with "admin").
func testRouter(p *Plugin) *gin.Engine { return meteredRouter(p, nil) }

// meteredRouter is testRouter with meter as the host's rate limit.
func meteredRouter(p *Plugin, meter gin.HandlerFunc) *gin.Engine {
	// A bare router: the plugin answers its own errors.
	r := gin.New()
	authed := r.Group("", func(c *gin.Context) {
		sub := c.GetHeader("X-Sub")
		if sub == "" {
			c.AbortWithStatus(http.StatusUnauthorized)
			return
		}
		roles := []string{lakegate.RoleReader}
		if strings.HasPrefix(sub, "admin") {
			roles = []string{lakegate.RoleAdmin}
		}
		c.Request = c.Request.WithContext(lakegate.WithCaller(c.Request.Context(), lakegate.Caller{Subject: sub, Roles: roles}))
	})
	p.Mount(authed, meter)
	return r
}

// openStore opens a block store (o.Dir: a temporary directory when not
// set), closed when the test ends.
func openStore(t *testing.T, o blocktransport.Options) *blocktransport.Store {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	store, err := blocktransport.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	return store
}

// PrepareTail is the real engine's: the tail tool and watch resources.
func (f *fakeEngine) PrepareTail(ctx context.Context, c lakegate.Caller, r query.TailRequest) (*query.Stmt, error) {
	f.record(c)
	return f.real.PrepareTail(ctx, c, r)
}
