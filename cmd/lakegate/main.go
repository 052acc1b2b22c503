// Command lakegate is the lakegate binary: the data server (serve), the MCP
// tools over standard input/output (stdio), admin commands for a running
// server (admin), a token maker (token) and its version (version).
package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/spf13/cobra"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/cluster"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/internal/gctune"
	"github.com/lakegate/lakegate/mcp"
	"github.com/lakegate/lakegate/query"
	"github.com/lakegate/lakegate/server"
	"github.com/lakegate/lakegate/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	gin.SetMode(gin.ReleaseMode)
	if err := newRoot(os.Stdout, os.Stderr, os.Environ()).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "lakegate:", err)
		os.Exit(1)
	}
}

// newRoot builds the CLI over the process environment environ (as
// os.Environ gives it).
func newRoot(stdout, stderr io.Writer, environ []string) *cobra.Command {
	root := &cobra.Command{
		Use:           "lakegate",
		Short:         "HTTP data server for SQL data with an MCP plugin for AI agents",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("lakegate {{.Version}}\n")
	getenv := lookupEnv(environ)
	root.SetOut(stdout)
	root.SetErr(stderr)
	var configFile string
	root.PersistentFlags().StringVar(&configFile, "config", "",
		"config file, JSON or YAML (else the one "+config.EnvConfig+" names); LAKEGATE_* variables override it")

	var conformance bool
	var listen string
	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the data server",
		Long: "Run the data server: REST, ingest, admin and MCP on one port.\n\n" +
			"Every setting, with its environment variable and default, is listed after the flags.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if conformance && !mcp.ConformanceFixtures {
				return errors.New("--conformance: this binary was built without the conformance fixtures; build with -tags conformance")
			}
			env := environ
			if cmd.Flags().Changed("listen") {
				// The flag outranks the environment, as the environment
				// outranks the file.
				env = append(slices.Clip(environ), "LAKEGATE_LISTEN="+listen)
			}
			cfg, err := loadConfig(configFile, env)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveWith(ctx, cfg, serveOptions{conformance: conformance}, stdout, stderr)
		},
	}
	serveCmd.Flags().StringVar(&listen, "listen", "", "host:port to serve on (overrides listen and LAKEGATE_LISTEN; default "+config.DefaultListen+")")
	serveCmd.Flags().BoolVar(&conformance, "conformance", false, "add the MCP conformance suite's fixture tools, resources and prompts (tests only; needs a build with -tags conformance)")
	_ = serveCmd.Flags().MarkHidden("conformance")
	help := serveCmd.HelpFunc()
	serveCmd.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		help(cmd, args)
		writeSettings(cmd.OutOrStdout())
	})
	root.AddCommand(serveCmd)
	root.AddCommand(newStdioCommand(&configFile, stderr, environ))
	root.AddCommand(newAdminCommand(stdout, getenv))
	root.AddCommand(newFetchCommand(stdout, stderr, getenv))

	var sub, role string
	var ttl time.Duration
	token := &cobra.Command{
		Use:   "token",
		Short: "Print an HS256 JWT signed with the configured secret",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(configFile, environ)
			if err != nil {
				return err
			}
			if cfg.JWTSecret == "" {
				return errors.New("no JWT secret configured: set LAKEGATE_JWT_SECRET or jwt_secret in the config file " +
					"(lakegate signs HS256 tokens only; with jwt_public_key_files or jwt_jwks_url, tokens come from their issuer)")
			}
			t, err := server.NewToken([]byte(cfg.JWTSecret), sub, role, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, t)
			return nil
		},
	}
	token.Flags().StringVar(&sub, "sub", "", "subject (who the token is for)")
	token.Flags().StringVar(&role, "role", lakegate.RoleReader, "role: reader, writer or admin")
	token.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	_ = token.MarkFlagRequired("sub")
	root.AddCommand(token)

	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Fprintln(stdout, "lakegate", version) },
	})
	return root
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	// Lines logged with a request's context carry its trace and span ids.
	if cfg.LogFormat == "json" {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
	}
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
}

// tuneGC applies gc_headroom, unless the GOGC variable says how to
// collect; the func it returns undoes it.
func tuneGC(cfg config.Config, log *slog.Logger) (undo func()) {
	if cfg.GCHeadroom > 0 && os.Getenv("GOGC") != "" {
		log.Info("gc_headroom is not applied: the GOGC variable is set", "gogc", os.Getenv("GOGC"))
		return func() {}
	}
	return gctune.Start(cfg.GCHeadroom)
}

// serveOptions are serve's flags beyond the configuration.
type serveOptions struct {
	conformance bool
}

// serve runs the server until ctx ends. Logs go to stderr; the connection
// help (tokens made for this run) goes to stdout.
func serve(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
	return serveWith(ctx, cfg, serveOptions{}, stdout, stderr)
}

// serveWith is serve with the command's flags.
func serveWith(ctx context.Context, cfg config.Config, so serveOptions, stdout, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	defer tuneGC(cfg, log)()
	// Before anything that makes spans is built; closed after it all.
	tracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing(tracing, log)
	demo := len(cfg.Databases) == 0
	if err := useDemo(ctx, &cfg, log); err != nil {
		return err
	}
	// A secret is made for the run only when no way to authenticate is
	// configured: then the connection help prints tokens signed with it.
	generated := !cfg.HasJWTKeys() && !cfg.TLSClientCertAuth
	if generated {
		var b [32]byte
		_, _ = rand.Read(b[:])
		cfg.JWTSecret = hex.EncodeToString(b[:])
	}
	// One worker pool and one set of per-subject limits for REST, ingest
	// and MCP; one registry for their metrics.
	metrics := server.NewMetrics()
	limits := server.NewLimits(cfg, metrics)
	// What serve builds it closes, the last built first: the server, then
	// the plugin, the block store and the engine (closeAll). Serve's drain
	// has shut the plugin's traffic down by then. ctx is cancelled by then
	// too: the closes wait as long as the release takes.
	// In a cluster (cluster_dsn) this replica registers first and leaves
	// last (cluster.go).
	peers, leave, err := joinCluster(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer leave()
	engine, plugin, closeAll, err := openPlugin(ctx, cfg, log, so.conformance, limits.MCP(), metrics, peers)
	if err != nil {
		return err
	}
	defer closeAll(context.WithoutCancel(ctx))
	if so.conformance {
		log.Warn("serving the MCP conformance fixtures (--conformance): for tests only")
	}
	sopts := &server.Options{Version: version, Logger: log, Metrics: metrics, Limits: limits, RunSecret: generated}
	closeSwitch, err := shareCluster(ctx, cfg, peers, plugin, sopts, log)
	if err != nil {
		return err
	}
	defer closeSwitch()
	srv, err := server.New(cfg, engine, plugin, sopts)
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("close server", lakegate.LogError, err.Error())
		}
	}()
	ln, err := net.Listen("tcp", cfg.Listen)
	if errors.Is(err, syscall.EADDRINUSE) {
		msg := fmt.Sprintf("listen on %s: address already in use (another process holds it): "+
			"choose another address with --listen, LAKEGATE_LISTEN or listen in the config file", cfg.Listen)
		if port := otherPort(cfg.Listen); port > 0 {
			host, _, _ := net.SplitHostPort(cfg.Listen)
			msg += fmt.Sprintf(", e.g. --listen %s (free now)", net.JoinHostPort(host, strconv.Itoa(port)))
		}
		return errors.New(msg)
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	base := "http://" + ln.Addr().String()
	if cfg.TLSCertFile != "" {
		base = "https://" + ln.Addr().String()
	}
	if err := advertise(ctx, cfg, peers, ln, base); err != nil {
		ln.Close()
		return err
	}
	log.Info("lakegate listening", "url", base, "mcp_enabled", plugin.Enabled(), "version", version)
	if generated {
		if err := printConnectHelp(stdout, cfg, connectInfo{base: base, mcpOn: plugin.Enabled(), demo: demo}); err != nil {
			ln.Close()
			return err
		}
	}
	// SIGHUP is caught from here on (uncaught, it would end the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnHangup(ctx, hup, plugin, log)
	return srv.Serve(ctx, ln)
}

// reloadOnHangup reloads the plugin's tools.json on each SIGHUP, the
// Unix daemon's "read your configuration again", until ctx ends. A
// refused file is logged by the plugin and the tools in use stay.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, plugin server.ToolsReloader, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			info, err := plugin.ReloadTools()
			if err != nil {
				log.Warn("SIGHUP: tools not reloaded", "error", err.Error())
				continue
			}
			log.Info("SIGHUP: tools reloaded", "source", info.Source, "tools", len(info.Tools), "groups", len(info.Groups))
		}
	}
}

// useDemo points an empty database list at the embedded demo database,
// creating it on first use.
func useDemo(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if len(cfg.Databases) > 0 {
		return nil
	}
	path := filepath.Join(cfg.DataDir, "demo.db")
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := query.CreateDemo(ctx, path); err != nil {
		return fmt.Errorf("demo database: %w", err)
	}
	cfg.Databases = []config.Database{{Name: "demo", URL: "sqlite:" + path}}
	log.Info("serving the embedded demo database", "path", path)
	return nil
}

// cursorKey signs the cursors of truncated results: derived from the HS256
// secret when there is one, so that cursors outlive a restart and work on
// every server sharing the secret; else nil (a key of the process's own).
func cursorKey(cfg config.Config) []byte {
	if cfg.JWTSecret == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(cfg.JWTSecret))
	m.Write([]byte("lakegate cursor key"))
	return m.Sum(nil)
}

// The MCP plugin is what the server hosts, with every capability the
// server looks for: a plugin losing one would lose its routes silently.
var _ interface {
	server.Plugin
	server.Switcher
	server.StatusReporter
	server.SessionHolder
	server.TransferHolder
	server.ToolsReloader
	server.DownloadTaker
	server.JobHolder
} = (*mcp.Plugin)(nil)

// openPlugin opens the query engine and the block store and builds the MCP plugin on them. The caller owns the three
// and closes them with closeAll, once nothing built on them (a server)
// runs: the plugin, then the block store, then the engine, each within
// ctx, failures logged. workers and observer, when not nil, are the
// server's shared pool and metrics.
func openPlugin(ctx context.Context, cfg config.Config, log *slog.Logger, conformance bool,
	workers host.Workers, observer host.Observer, peers *cluster.Peers) (
	engine *query.Engine, plugin *mcp.Plugin, closeAll func(ctx context.Context), err error) {
	qopts := query.OptionsFrom(cfg)
	qopts.Logger = log
	qopts.CursorKey = cursorKey(cfg)
	engine, err = query.Open(ctx, cfg.Databases, &qopts)
	if err != nil {
		return nil, nil, nil, err
	}
	bopts := mcp.BlockOptions(cfg)
	bopts.Logger = log
	bopts.IDPrefix = peers.Prefix()
	blocks, err := blocktransport.Open(bopts)
	if err != nil {
		closeEngine(context.WithoutCancel(ctx), engine, log)
		return nil, nil, nil, err
	}
	closeStores := func(ctx context.Context) {
		if err := blocks.Close(ctx); err != nil {
			log.Warn("clean block spool", lakegate.LogError, err.Error())
		}
		closeEngine(ctx, engine, log)
	}
	popts := mcp.OptionsFrom(cfg)
	popts.Tools = lakegate.DefaultTools
	popts.Blocks = blocks
	popts.Workers = workers
	popts.Observer = observer
	popts.Peers = peers.Interface()
	popts.Conformance = conformance
	popts.Version = version
	popts.Logger = log
	plugin, err = mcp.New(engine, &popts)
	if err != nil {
		closeStores(context.WithoutCancel(ctx))
		return nil, nil, nil, err
	}
	closeAll = func(ctx context.Context) {
		if err := plugin.Close(ctx); err != nil {
			log.Warn("close mcp plugin", lakegate.LogError, err.Error())
		}
		closeStores(ctx)
	}
	return engine, plugin, closeAll, nil
}

// closeEngine closes engine within ctx and logs a failure.
func closeEngine(ctx context.Context, engine *query.Engine, log *slog.Logger) {
	if err := engine.Close(ctx); err != nil {
		log.Warn("close query engine", lakegate.LogError, err.Error())
	}
}

// otherPort suggests a free port next to the one in addr: the first of
// the next 100 that can be listened on now (0 when none can).
func otherPort(addr string) int {
	host, p, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n >= 65535 {
		n = config.DefaultPort
	}
	for port := n + 1; port <= min(n+100, 65535); port++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			ln.Close()
			return port
		}
	}
	return 0
}
