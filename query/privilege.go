package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lakegate/lakegate"
)

// PostgreSQL's privileges are the first wall around callers' SQL, the
// validator the second: before a PostgreSQL database is served, Open
// inspects every role callers' SQL can run as on it — the access rules'
// pg_role, query_role, and the connecting users, since RESET ROLE (or
// set_config('role', ...), past one validator miss) returns to the
// session's own user — and refuses to start when one of them could step
// outside the data it was given. Options.AllowPrivilegedRole starts anyway
// and logs each finding at WARN.

// privilegedMemberships are the predefined roles a role running callers'
// SQL must not be a member of: they read or write server files, run
// programs on the server, signal other backends, or read or write every
// table whatever its grants. (Those a server does not have are skipped.)
var privilegedMemberships = []string{
	"pg_execute_server_program", "pg_read_all_data", "pg_read_server_files",
	"pg_signal_backend", "pg_write_all_data", "pg_write_server_files",
}

// servedRelations lists the relations a request may name, as the
// catalog does (pgTablesSQL): lakegate's own tables left out.
const servedRelations = `
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND ` + pgNotOwn

// roleCheckSQL reads what makes role $1 privileged; $2 are
// privilegedMemberships. No row: the role does not exist.
const roleCheckSQL = `
SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole,
  ARRAY(SELECT p.rolname::text FROM pg_roles p
        WHERE p.rolname = ANY($2) AND pg_has_role(r.oid, p.oid, 'MEMBER') ORDER BY 1),
  ARRAY(SELECT CASE WHEN n.nspname = 'public' THEN c.relname::text ELSE n.nspname || '.' || c.relname END ` + servedRelations + `
          AND pg_has_role(r.oid, c.relowner, 'MEMBER') ORDER BY 1)
FROM pg_roles r WHERE r.rolname = $1`

// readableSQL lists the served relations role $1 can read a column of.
const readableSQL = `
SELECT CASE WHEN n.nspname = 'public' THEN c.relname::text ELSE n.nspname || '.' || c.relname END ` + servedRelations + `
  AND has_any_column_privilege($1, c.oid, 'SELECT')
ORDER BY 1`

// roleUse is one role callers' SQL can run as on a database, and why.
type roleUse struct {
	role string
	// as says how callers reach it, for messages.
	as string
	// tables, when not nil, are the only relations the role's callers
	// may read (an access rule's list): PostgreSQL must keep it to them.
	tables []string
}

// roleUses lists the roles callers' SQL can run as on database db, whose
// connecting users are logins.
func (e *Engine) roleUses(db string, logins []string) []roleUse {
	var uses []roleUse
	for _, l := range logins {
		uses = append(uses, roleUse{role: l, as: "lakegate connects as"})
	}
	def := e.opts.QueryRole
	if def != "" {
		uses = append(uses, roleUse{role: def, as: "query_role"})
	} else if len(logins) > 0 {
		def = logins[0]
	}
	roles := make([]string, 0, len(e.opts.Access))
	for r := range e.opts.Access {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		a := e.opts.Access[r]
		if len(a.Databases) > 0 && !slices.Contains(a.Databases, db) {
			continue
		}
		u := roleUse{role: def, as: fmt.Sprintf("access rule %q runs as", r)}
		if a.PGRole != "" {
			u.role, u.as = a.PGRole, fmt.Sprintf("access rule %q's pg_role", r)
		}
		list, listed := a.Tables[db]
		if !listed && a.PGRole == "" {
			continue // the same role as query_role, already checked
		}
		if listed {
			u.tables = list
			if u.tables == nil {
				u.tables = []string{}
			}
		}
		uses = append(uses, u)
	}
	return uses
}

// checkPrivileges inspects the roles callers' SQL can run as on the
// PostgreSQL database src serves and returns what makes any of them
// privileged, one sentence each; none: nil. readURLs are its standbys,
// whose users are roles of the same server.
func (e *Engine) checkPrivileges(ctx context.Context, name string, src *pgSource, readURLs []string) ([]string, error) {
	var login string
	if err := src.pool.QueryRow(ctx, "SELECT session_user::text").Scan(&login); err != nil {
		return nil, fmt.Errorf("database %q: read the connecting user: %w", name, err)
	}
	logins := []string{login}
	for _, u := range readURLs {
		if cfg, err := pgxpool.ParseConfig(u); err == nil && cfg.ConnConfig.User != "" && !slices.Contains(logins, cfg.ConnConfig.User) {
			logins = append(logins, cfg.ConnConfig.User)
		}
	}
	var findings []string
	exists := map[string]bool{} // by role, once inspected
	for _, u := range e.roleUses(name, logins) {
		if _, seen := exists[u.role]; !seen {
			f, ok, err := roleFindings(ctx, src.pool, u)
			if err != nil {
				return nil, fmt.Errorf("database %q: inspect PostgreSQL role %q: %w", name, u.role, err)
			}
			exists[u.role] = ok
			findings = append(findings, f...)
		}
		if u.tables == nil || !exists[u.role] {
			continue
		}
		rows, _ := src.pool.Query(ctx, readableSQL, u.role)
		readable, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("database %q: list what PostgreSQL role %q reads: %w", name, u.role, err)
		}
		extra := slices.DeleteFunc(readable, func(t string) bool { return slices.Contains(u.tables, t) })
		if len(extra) > 0 {
			findings = append(findings, fmt.Sprintf("%s %q, which can read %s although the rule lists only %s",
				u.as, u.role, few(extra), orNone(u.tables)))
		}
	}
	for i, f := range findings {
		findings[i] = fmt.Sprintf("database %q: %s", name, f)
	}
	return findings, nil
}

// roleFindings says what makes u.role privileged, and whether it exists.
func roleFindings(ctx context.Context, pool *pgxpool.Pool, u roleUse) ([]string, bool, error) {
	var super, bypass, createRole bool
	var members, owns []string
	err := pool.QueryRow(ctx, roleCheckSQL, u.role, privilegedMemberships).Scan(&super, &bypass, &createRole, &members, &owns)
	if errors.Is(err, pgx.ErrNoRows) {
		return []string{fmt.Sprintf("%s %q, which does not exist", u.as, u.role)}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var what []string
	if super {
		what = append(what, "is a superuser")
	}
	if bypass {
		what = append(what, "bypasses row-level security (BYPASSRLS)")
	}
	if createRole {
		what = append(what, "has CREATEROLE (it can grant itself other roles)")
	}
	if len(members) > 0 && !super {
		what = append(what, "is a member of "+strings.Join(members, ", "))
	}
	if len(owns) > 0 && !super {
		what = append(what, "owns served relations ("+few(owns)+"): an owner passes every grant and can run maintenance functions")
	}
	if len(what) == 0 {
		return nil, true, nil
	}
	return []string{fmt.Sprintf("%s %q, which %s", u.as, u.role, strings.Join(what, "; "))}, true, nil
}

// few names at most five of names.
func few(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// privilegeHint says how to run callers' SQL without privileges.
const privilegeHint = "connect as a login role that is not a superuser and owns none of the served tables, " +
	"give it a NOLOGIN role holding SELECT on the served tables only (CREATE ROLE lakegate_reader NOLOGIN; " +
	"GRANT SELECT ON ALL TABLES IN SCHEMA public TO lakegate_reader; GRANT lakegate_reader TO <login>) and name it in query_role; " +
	"an access rule with a table list needs a pg_role that can read just those tables. " +
	"To start anyway, set allow_privileged_role: true (every finding is then logged at WARN)"

// guard runs checkPrivileges on PostgreSQL database name and refuses a
// privileged role unless the operator opted in.
func (e *Engine) guard(ctx context.Context, name string, src *pgSource, readURLs []string) error {
	found, err := e.checkPrivileges(ctx, name, src, readURLs)
	if err != nil || len(found) == 0 {
		return err
	}
	if e.opts.AllowPrivilegedRole {
		for _, f := range found {
			e.log.Warn("allow_privileged_role: callers' SQL runs with privileges it does not need", "finding", f)
		}
		return nil
	}
	return &lakegate.Error{Kind: lakegate.KindValidation,
		Message: "callers' SQL would run as a privileged PostgreSQL role: " + strings.Join(found, "; "),
		Hint:    privilegeHint}
}
