// Package pgtest sets up a PostgreSQL test database the way lakegate's
// README asks an operator to: a login role that is no superuser and owns
// none of the served tables, and a NOLOGIN query role holding SELECT only,
// which callers' SQL runs as (query_role). Tests serve databases through
// these roles, so the quick start they prove is the safe start.
//
// It is test support: only _test.go files import it. It imports nothing of
// lakegate's.
package pgtest

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// The roles LeastPrivileged makes. They are cluster-wide: every test
// database of one server shares them.
const (
	// Login connects: it writes (ingest; tests clean up through it too)
	// and keeps lakegate's own tables, and may switch to QueryRole.
	Login = "lakegate_test_app"
	// QueryRole runs callers' SQL: SELECT on the tables of schema public.
	QueryRole = "lakegate_test_reader"
	// Privileged is a role lakegate must refuse to run callers' SQL as:
	// it bypasses row-level security and reads server files. It is made
	// once here, with the others, so that no test changes the server's
	// roles while another watches them; Login is not its member.
	Privileged = "lakegate_test_privileged"
	// Narrow is a role Login may switch to that holds no grant of its
	// own: a test grants it the tables of its database it needs.
	Narrow = "lakegate_test_narrow"
	// NoLimit may log in but never connect (CONNECTION LIMIT 0): a
	// database that answers "too many connections" to it.
	NoLimit = "lakegate_test_nolimit"
)

// LeastPrivileged makes the roles (once per server) and grants them what
// they need in the database adminURL names, including tables made later
// by adminURL's user; it returns adminURL with the user Login.
// adminURL's user must be able to create roles.
func LeastPrivileged(ctx context.Context, adminURL string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return "", err
	}
	stmts := []string{
		createRole(Login, "LOGIN", ""),
		createRole(QueryRole, "NOLOGIN", Login),
		createRole(Privileged, "NOLOGIN BYPASSRLS IN ROLE pg_read_server_files", ""),
		createRole(Narrow, "NOLOGIN", Login),
		createRole(NoLimit, "LOGIN CONNECTION LIMIT 0", ""),
		"GRANT CREATE ON SCHEMA public TO " + Login,
		// Every schema made so far: the tables callers may read.
		fmt.Sprintf(`DO $$ DECLARE s text; BEGIN
  FOR s IN SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%%' LOOP
    EXECUTE format('GRANT USAGE ON SCHEMA %%I TO %s, %s', s);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %%I TO %s', s);
  END LOOP; END $$`, QueryRole, Login, QueryRole),
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + Login,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO " + Login,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO " + QueryRole,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO " + Login,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO " + Login,
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return "", fmt.Errorf("%s: %w", s, err)
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", err
	}
	u.User = url.User(Login)
	return u.String(), nil
}

// Role makes (once per server) a NOLOGIN role that Login may switch to,
// holding SELECT on tables of the database adminURL names only.
func Role(ctx context.Context, adminURL, role string, tables ...string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	stmts := []string{createRole(role, "NOLOGIN", Login)}
	for _, t := range tables {
		stmts = append(stmts, "GRANT SELECT ON "+pgx.Identifier{t}.Sanitize()+" TO "+role)
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// createRole creates role unless it exists, and grants it to member
// (unless ""). Roles belong to the whole server, which test processes
// share: an advisory lock takes them in turn.
func createRole(role, opts, member string) string {
	grant := ""
	if member != "" {
		grant = fmt.Sprintf("GRANT %s TO %s;", role, member)
	}
	return fmt.Sprintf(`DO $$ BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('lakegate pgtest roles'));
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s %s; END IF;
  %s
END $$`, role, role, opts, grant)
}
