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

// retryEvery is the wait before the listener connects again after losing
// its connection.
const retryEvery = time.Second

// Switch is the MCP on/off state shared by the replicas that name the same
// database. Build it with Open; Close it after the server that calls Set.
type Switch struct {
	dsn   string
	apply func(enabled bool)
	log   *slog.Logger

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
// and records it), and follows every later change by calling apply. It
// fails when the database cannot be reached or written: a replica that
// cannot share the switch must not start as if it could.
func Open(ctx context.Context, dsn string, initial bool, apply func(enabled bool), log *slog.Logger) (*Switch, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Switch{dsn: dsn, apply: apply, log: log, done: make(chan struct{})}
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, err
	}
	// The first replica records its configured state; the others adopt
	// the recorded one. The row is read after LISTEN, so no change can fall
	// between the read and the first notification.
	if _, err := conn.Exec(ctx, `INSERT INTO lakegate_cluster_state (name, value, changed_by) VALUES ('mcp', $1, 'start') ON CONFLICT (name) DO NOTHING`, onOff(initial)); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("cluster: record the MCP switch: %w", err)
	}
	if err := s.sync(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.follow(lctx, conn)
	return s, nil
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

// follow applies each notified change until ctx ends. When the connection
// is lost it connects again (every retryEvery) and reads the state, which
// covers the changes it missed meanwhile.
func (s *Switch) follow(ctx context.Context, conn *pgx.Conn) {
	defer close(s.done)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			state, v, _ := strings.Cut(n.Payload, ":")
			version, _ := strconv.ParseInt(v, 10, 64)
			s.applyAt(state == "on", version)
			continue
		}
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("cluster: lost the connection that follows the MCP switch; reconnecting", lakegate.LogError, err.Error())
		for conn = nil; conn == nil; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryEvery):
			}
			c, err := s.listen(ctx)
			if err == nil {
				if err = s.sync(ctx, c); err != nil {
					c.Close(context.Background())
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("cluster: reconnect", lakegate.LogError, err.Error())
				}
				continue
			}
			conn = c
			s.log.Info("cluster: following the MCP switch again")
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
