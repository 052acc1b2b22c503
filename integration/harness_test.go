// Package integration holds lakegate's end-to-end tests: the real server on
// a loopback port, a real PostgreSQL (LAKEGATE_TEST_DATABASE_URL) and real
// MCP clients.
package integration

import (
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/internal/pgtest"
	"github.com/lakegate/lakegate/internal/testutil"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
	"github.com/lakegate/lakegate/server"
)

//go:embed testdata/seed.sql
var seedSQL string

const (
	testDB     = "lakegate_it"
	testSecret = "integration-test-secret-0123456789abcdef"
)

// dbURL is the seeded test database as its owner, a superuser: for the
// tests' own reads and set-up. appURL is the same database as
// pgtest.Login, a least-privileged role: what every server under test
// connects as, running callers' SQL as pgtest.QueryRole. Both are set by
// TestMain.
var dbURL, appURL string

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	admin := os.Getenv("LAKEGATE_TEST_DATABASE_URL")
	if admin == "" {
		fmt.Println("integration: LAKEGATE_TEST_DATABASE_URL is not set; run `make test`, which starts a PostgreSQL")
		os.Exit(0)
	}
	u, err := seed(admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: seed:", err)
		os.Exit(1)
	}
	dbURL = u
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	appURL, err = pgtest.LeastPrivileged(ctx, dbURL)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: roles:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// seed (re)creates the test database and loads testdata/seed.sql.
func seed(adminURL string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + testDB + " WITH (FORCE)", "CREATE DATABASE " + testDB} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return "", err
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + testDB
	dbc, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return "", err
	}
	defer dbc.Close(ctx)
	if _, err := dbc.Exec(ctx, seedSQL); err != nil {
		return "", err
	}
	return u.String(), nil
}

// env is one running lakegate server on a loopback port.
type env struct {
	base      string
	engine    *query.Engine
	plugin    *mcp.Plugin
	pool      *pgxpool.Pool // direct access to compare results
	blocks    *blocktransport.Store
	blocksDir string
	// clientTLS trusts the server's certificate (tls only).
	clientTLS *tls.Config
	serve     *serveHandle
}

// serveHandle stops a running Serve once.
type serveHandle struct {
	stop   func() error // cancels Serve's context, returns its result
	byTest bool         // the test stopped it (env.shutdown)
}

// shutdown stops the server as SIGTERM does (cancels Serve's context) and
// returns Serve's result; the test's cleanup then leaves it be.
func (e *env) shutdown() error {
	e.serve.byTest = true
	return e.serve.stop()
}

type envOptions struct {
	keepalive    time.Duration
	writeTimeout time.Duration
	queue        int
	// plugin, when set, adjusts the plugin's options.
	plugin func(*mcp.Options)
	// blocks, when set, gives the plugin a block store with these options
	// (Dir defaults to a temporary directory).
	blocks *blocktransport.Options
	// tls serves HTTPS and HTTP/3 with a self-signed certificate.
	tls bool
	// config, when set, adjusts the server's configuration.
	config func(*config.Config)
	// drain is the server's drain timeout (default 5s).
	drain time.Duration
}

// start runs the real server (config, engine, plugin, server) on
// 127.0.0.1:0 and stops it when the test ends; then no goroutine started
// since start may be left.
func start(t *testing.T, o envOptions) *env {
	t.Helper()
	// Registered first, so it runs after every cleanup below.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if err := findLeaks(before); err != nil {
			t.Errorf("goroutines left after the server stopped: %v", err)
		}
	})
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.JWTSecret = testSecret
	cfg.MCPEnabled = true
	cfg.Databases = []config.Database{{Name: "iot", URL: appURL}}
	cfg.QueryRole = pgtest.QueryRole
	if o.keepalive > 0 {
		cfg.MCPKeepalive = config.Duration(o.keepalive)
	}
	if o.writeTimeout > 0 {
		cfg.MCPWriteTimeout = config.Duration(o.writeTimeout)
	}
	if o.queue > 0 {
		cfg.MCPSessionQueue = o.queue
	}
	var clientTLS *tls.Config
	if o.tls {
		cfg.TLSCertFile, cfg.TLSKeyFile, clientTLS = serverCert(t)
	}
	if o.config != nil {
		o.config(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := t.Context()
	// Wired as the binary wires them: each package's options from the
	// config, one pool and one registry.
	qopts := query.OptionsFrom(cfg)
	qopts.Logger = log
	engine, err := query.Open(ctx, cfg.Databases, &qopts)
	if err != nil {
		t.Fatal(err)
	}
	// Each value is closed by the cleanup registered where it is built:
	// the server, then the plugin, the block store and the engine.
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	metrics := server.NewMetrics()
	limits := server.NewLimits(cfg, metrics)
	popts := new(mcp.OptionsFrom(cfg))
	popts.Tools = lakegate.DefaultTools
	popts.Logger = log
	popts.Workers = limits.MCP()
	popts.Observer = metrics
	var blocks *blocktransport.Store
	var bo blocktransport.Options
	if o.blocks != nil {
		bo = *o.blocks
		if bo.Dir == "" {
			bo.Dir = t.TempDir()
		}
		if blocks, err = blocktransport.Open(bo); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = blocks.Close(context.Background()) })
		popts.Blocks = blocks
	}
	if o.plugin != nil {
		o.plugin(popts)
	}
	plugin, err := mcp.New(engine, popts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plugin.Close(context.Background()) })
	cfg.DrainTimeout = config.Duration(5 * time.Second)
	if o.drain != 0 {
		cfg.DrainTimeout = config.Duration(o.drain)
	}
	srv, err := server.New(cfg, engine, plugin, &server.Options{Logger: log, Metrics: metrics, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	served := &serveHandle{stop: sync.OnceValue(func() error { stop(); return <-done })}
	t.Cleanup(func() {
		// A connection the test's clients dialled but never used is "new"
		// to the server, which waits 5 s before it counts as idle at
		// shutdown: close the clients' idle connections first.
		http.DefaultClient.CloseIdleConnections()
		if err := served.stop(); err != nil && !served.byTest {
			t.Errorf("serve: %v", err)
		}
	})
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	scheme := "http://"
	if o.tls {
		scheme = "https://"
	}
	return &env{base: scheme + ln.Addr().String(), engine: engine, plugin: plugin, pool: pool, blocks: blocks, blocksDir: bo.Dir, clientTLS: clientTLS, serve: served}
}

// findLeaks is goleak.Find with more patience than its half second: on a
// loaded machine, connection goroutines can take longer to see their end.
func findLeaks(opts ...goleak.Option) error {
	var err error
	testutil.Within(7*time.Second, func() bool {
		err = goleak.Find(opts...)
		return err == nil
	})
	return err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// token signs a token for subject with role.
func token(subject, role string) string { return testutil.Token(testSecret, subject, role) }

func httpClient(tok string) *http.Client {
	return &http.Client{Transport: testutil.Bearer{Token: tok}}
}

// connect opens a go-sdk client session over /mcp/sse as subject.
func (e *env) connect(t *testing.T, tok string) *mcpsdk.ClientSession {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "lakegate-it", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcpsdk.SSEClientTransport{
		Endpoint:   e.base + "/mcp/sse",
		HTTPClient: httpClient(tok),
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
