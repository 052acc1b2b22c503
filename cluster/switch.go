// Package cluster shares state among lakegate replicas through
// PostgreSQL, so that any replica behind a balancer can change it and
// every replica follows: today the MCP on/off switch. The state lives in a
// table (a replica that starts later reads it) and each change is
// announced with NOTIFY in the same transaction (the others follow at
// once, over a connection that LISTENs).
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/internal/backoff"
)

// channel is the NOTIFY channel of switch changes; the payload is "on" or
// "off", a colon and the change's version.
const channel = "lakegate_mcp_switch"

// schema makes the state table: one row per setting.
const schema = `CREATE TABLE IF NOT EXISTS lakegate_cluster_state (
	name text PRIMARY KEY,
	value text NOT NULL,
	changed_by text NOT NULL,
	changed_at timestamptz NOT NULL DEFAULT now(),
	version bigint NOT NULL DEFAULT 0)`

// ensureSchema makes the cluster's tables, one replica at a time (an
// advisory lock: concurrent CREATE TABLE IF NOT EXISTS can fail).
func ensureSchema(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, stmt := range []string{`SELECT pg_advisory_xact_lock(hashtext('lakegate_cluster'))`, schema, addVersion, replicasSchema} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// addVersion brings a table made before versions had them.
const addVersion = `ALTER TABLE lakegate_cluster_state ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0`

// ApplicationName names the connections that follow the switch in
// pg_stat_activity.
const ApplicationName = "lakegate cluster"

// switchBackoff is the listener's pause before it connects again after
// losing its connection: a second doubled up to 30 s, with equal jitter.
var switchBackoff = backoff.Policy{Base: time.Second, Cap: 30 * time.Second}

// Switch is the MCP on/off state shared by the replicas that name the same
// database. Build it with Open; Close it after the server that calls Set.
type Switch struct {
	dsn     string
	initial bool // the replica's own state, recorded when no replica has
	apply   func(enabled bool)
	log     *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// mu orders the states applied: a change is applied only when its
	// version is newer than the last one (a notification and Set's own
	// read may arrive in either order).
	mu      sync.Mutex
	version int64
	applied bool
}

// applyAt applies state on at version unless a newer one was applied.
func (s *Switch) applyAt(on bool, version int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied && version < s.version {
		return
	}
	s.version, s.applied = version, true
	s.apply(on)
}

// Open connects to the database at dsn, creates the state table if needed,
// applies the shared state if there is one (else keeps the replica's own
// and records it), and follows every later change by calling apply. A
// database that does not answer is not an error: the replica keeps its
// own state (initial, already applied by its owner) and adopts the shared
// one as soon as the database answers; until then Set fails, saying so.
func Open(ctx context.Context, dsn string, initial bool, apply func(enabled bool), log *slog.Logger) (*Switch, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return nil, fmt.Errorf("cluster: cluster_dsn: %w", err)
	}
	s := &Switch{dsn: dsn, initial: initial, apply: apply, log: log, done: make(chan struct{})}
	conn, err := s.connect(ctx)
	if err != nil {
		log.Warn("cluster: the MCP switch is not shared until the cluster database answers; this replica keeps its own",
			"mcp_enabled", initial, lakegate.LogError, err.Error())
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.follow(lctx, conn)
	return s, nil
}

// connect listens for changes, records the replica's initial state if no
// replica did, and applies the recorded one. The row is read after LISTEN,
// so no change can fall between the read and the first notification.
func (s *Switch) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `INSERT INTO lakegate_cluster_state (name, value, changed_by) VALUES ('mcp', $1, 'start') ON CONFLICT (name) DO NOTHING`, onOff(s.initial)); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("cluster: record the MCP switch: %w", err)
	}
	if err := s.sync(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listen connects, makes the table and starts listening.
func (s *Switch) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return nil, fmt.Errorf("cluster: cluster_dsn: %w", err)
	}
	cfg.RuntimeParams["application_name"] = ApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: connect: %w", err)
	}
	if err = ensureSchema(ctx, conn); err == nil {
		_, err = conn.Exec(ctx, "LISTEN "+channel)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return conn, nil
}

// sync reads the recorded state and applies it.
func (s *Switch) sync(ctx context.Context, conn *pgx.Conn) error {
	var v string
	var version int64
	if err := conn.QueryRow(ctx, `SELECT value, version FROM lakegate_cluster_state WHERE name = 'mcp'`).Scan(&v, &version); err != nil {
		return fmt.Errorf("cluster: read the MCP switch: %w", err)
	}
	s.applyAt(v == "on", version)
	return nil
}

// follow applies each notified change until ctx ends. Without a
// connection (conn nil, or lost) it connects again with backoff and reads
// the state, which covers the changes it missed meanwhile; a failure is
// logged when its cause changes.
func (s *Switch) follow(ctx context.Context, conn *pgx.Conn) {
	defer close(s.done)
	var last string // the last failure logged
	for {
		if conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err == nil {
				state, v, _ := strings.Cut(n.Payload, ":")
				version, _ := strconv.ParseInt(v, 10, 64)
				s.applyAt(state == "on", version)
				continue
			}
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("cluster: lost the connection that follows the MCP switch; reconnecting", lakegate.LogError, err.Error())
		}
		for attempt := 1; conn == nil; attempt++ {
			if !backoff.Wait(ctx, switchBackoff.Delay(attempt)) {
				return
			}
			c, err := s.connect(ctx)
			if err != nil {
				if ctx.Err() == nil && err.Error() != last {
					last = err.Error()
					s.log.Warn("cluster: the MCP switch's database does not answer; retrying", lakegate.LogError, last)
				}
				continue
			}
			conn, last = c, ""
			s.log.Info("cluster: following the MCP switch")
		}
	}
}

// Set records the switch and tells every replica, this one included,
// in one transaction. by is who asked, for the record.
func (s *Switch) Set(ctx context.Context, enabled bool, by string) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return unavailable(err)
	}
	defer conn.Close(context.Background())
	var version int64
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `UPDATE lakegate_cluster_state SET value = $1, changed_by = $2, changed_at = now(), version = version + 1
			WHERE name = 'mcp' RETURNING version`, onOff(enabled), by).Scan(&version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, onOff(enabled)+":"+strconv.FormatInt(version, 10))
		return err
	})
	if err != nil {
		return unavailable(err)
	}
	// Applied here too, at once, so that the answer shows it; the
	// notification confirms it, and a later change wins over both.
	s.applyAt(enabled, version)
	return nil
}

func unavailable(err error) error {
	return &lakegate.Error{Kind: lakegate.KindUnavailable, Message: "the cluster's shared state cannot be written",
		Hint: "check the cluster database (cluster_dsn); nothing was changed", RetryAfter: 5 * time.Second, Err: err}
}

// Close stops following the switch, waiting for that until ctx ends. It
// is idempotent.
func (s *Switch) Close(ctx context.Context) error {
	s.once.Do(s.cancel)
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: close: %w", ctx.Err())
	}
}

func onOff(enabled bool) string {
	if enabled {
		return "on"
	}
	return "off"
}
