package query

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/config"
	"github.com/lakegate/lakegate/query/validate"
)

// grant is what one caller may use of one database, from the access rules
// (Options.Access) of the roles it holds. A caller none of whose roles has
// a rule may use every database and table.
type grant struct {
	db string
	// subject is the caller's, whose share of the result cache its
	// reads take.
	subject string
	// who names the caller's roles that have rules, for messages.
	who string
	// tables are the request names of the tables and views the caller may
	// read; nil means every table.
	tables map[string]bool
	// pgRole is the PostgreSQL role its queries run as: its rule's
	// pg_role, else Options.QueryRole; empty: the connecting user.
	pgRole string
	// serverInfo is the server_info_functions policy (normalized: never
	// empty) and infoOK whether it lets this caller call them.
	serverInfo string
	infoOK     bool
	// allowFunc allows the functions of the allowed_functions setting
	// (validate.AllowFunctions); nil: none beyond lakegate's list.
	allowFunc func(schema, name string) bool
}

// grantFor checks that c may use database db and returns what it may use
// there. Every entry point of the engine calls it first.
func (e *Engine) grantFor(c lakegate.Caller, db string) (*grant, error) {
	roles := e.ruledRoles(c)
	g := &grant{db: db, subject: c.Subject, serverInfo: e.opts.ServerInfoFunctions, pgRole: e.opts.QueryRole}
	g.allowFunc = validate.AllowFunctions(e.opts.AllowedFunctions)
	switch g.serverInfo {
	case config.ServerInfoAll:
		g.infoOK = true
	case config.ServerInfoAdmin:
		g.infoOK = c.HasRole(lakegate.RoleAdmin)
	}
	if len(roles) == 0 {
		return g, nil
	}
	g.who = roleWords(roles)
	allowed, allTables := false, false
	tables := map[string]bool{}
	var pgRoles []string
	for _, r := range roles {
		a := e.opts.Access[r]
		if len(a.Databases) > 0 && !slices.Contains(a.Databases, db) {
			continue
		}
		allowed = true
		if list, ok := a.Tables[db]; ok {
			for _, t := range list {
				tables[t] = true
			}
		} else {
			allTables = true
		}
		if a.PGRole != "" && !slices.Contains(pgRoles, a.PGRole) {
			pgRoles = append(pgRoles, a.PGRole)
		}
	}
	if !allowed {
		open := e.databasesOf(roles)
		hint := "no database is open to " + g.who
		if len(open) > 0 {
			hint = "databases open to " + g.who + ": " + strings.Join(open, ", ")
		}
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden, Message: fmt.Sprintf("database %q is not open to %s", db, g.who), Hint: hint}
	}
	if len(pgRoles) > 1 {
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden,
			Message: fmt.Sprintf("%s run database %q as different PostgreSQL roles (%s)", g.who, db, strings.Join(pgRoles, ", ")),
			Hint:    "use a token with only one of these roles"}
	}
	if !allTables {
		g.tables = tables
	}
	if len(pgRoles) == 1 {
		g.pgRole = pgRoles[0]
	}
	return g, nil
}

// ruledRoles are the caller's roles that have an access rule, sorted.
func (e *Engine) ruledRoles(c lakegate.Caller) []string {
	var out []string
	for _, r := range c.Roles {
		if _, ok := e.opts.Access[r]; ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// databasesOf lists the configured databases open to one of roles.
func (e *Engine) databasesOf(roles []string) []string {
	var out []string
	for _, n := range e.names {
		for _, r := range roles {
			if a := e.opts.Access[r]; len(a.Databases) == 0 || slices.Contains(a.Databases, n) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// DatabasesFor lists the databases c may use, sorted by name.
func (e *Engine) DatabasesFor(c lakegate.Caller) []Database {
	out := make([]Database, 0, len(e.names))
	for _, d := range e.Databases() {
		if _, err := e.grantFor(c, d.Name); err == nil {
			out = append(out, d)
		}
	}
	return out
}

func roleWords(roles []string) string {
	if len(roles) == 1 {
		return "role " + roles[0]
	}
	return "roles " + strings.Join(roles, ", ")
}

// allows reports whether the caller may read table t.
func (g *grant) allows(t *tableInfo) bool {
	return g.tables == nil || g.tables[t.Name]
}

// table looks up name in cat as the caller may see it: a table it may not
// read is forbidden, and the hint of an unknown one lists only the tables
// open to it.
func (g *grant) table(cat *catalog, name string) (*tableInfo, error) {
	if g.tables == nil {
		return cat.table(g.db, name)
	}
	t, err := cat.table(g.db, name)
	if err != nil {
		return g.view(cat).table(g.db, name)
	}
	if !g.allows(t) {
		return nil, &lakegate.Error{Kind: lakegate.KindForbidden,
			Message: fmt.Sprintf("table %q of database %q is not open to %s", t.Name, g.db, g.who),
			Hint:    g.tablesHint()}
	}
	return t, nil
}

// view is cat with only the tables the caller may read.
func (g *grant) view(cat *catalog) *catalog {
	v := &catalog{byName: map[string]*tableInfo{}, loaded: cat.loaded}
	for _, t := range cat.tables {
		if g.allows(t) {
			v.tables = append(v.tables, t)
			v.byName[t.Name] = t
		}
	}
	return v
}

func (g *grant) tablesHint() string {
	return fmt.Sprintf("tables of database %q open to %s: %s", g.db, g.who, strings.Join(g.tableNames(), ", "))
}

// tableNames are the names on the caller's table list, sorted.
func (g *grant) tableNames() []string {
	names := make([]string, 0, len(g.tables))
	for t := range g.tables {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// deniedHint is tablesHint led by the tables on the list close to t (a
// typo of one of them): candidates come from the list only, so a table
// the caller may not read is never named.
func (g *grant) deniedHint(d Dialect, t validate.TableRef) string {
	name := t.Name
	if d == Postgres && t.Schema != "" && t.Schema != "public" {
		name = t.String()
	}
	if dym := DidYouMean(name, g.tableNames()); dym != "" {
		return dym + " " + g.tablesHint()
	}
	return g.tablesHint()
}

// checkKey names what check's answer for sqlText depends on, for the
// cache of accepted statements: the database (its dialect), the
// server-information policy's answer for this caller, its table list
// and the text.
func (g *grant) checkKey(sqlText string) string {
	tables := "*"
	if g.tables != nil {
		names := make([]string, 0, len(g.tables))
		for t := range g.tables {
			names = append(names, t)
		}
		sort.Strings(names)
		tables = strings.Join(names, "\x01")
	}
	return fmt.Sprintf("sql\x00%s\x00%t\x00%s\x00%s", g.db, g.infoOK, tables, sqlText)
}

// check validates caller-written SQL (validate.Check). With a table list,
// only its tables may be read: another table is forbidden, and a
// statement whose tables the validator cannot list is refused.
//
// Server-information functions are open to the callers the
// server_info_functions policy names; the refusal says which function and
// which setting: forbidden when another token could call it (policy
// admin), a validation error when no caller may (policy none).
func (g *grant) check(d Dialect, sqlText string) error {
	var denied *validate.TableRef
	opts := &validate.Options{ServerInfo: g.infoOK, AllowFunction: g.allowFunc}
	if g.tables != nil {
		opts.AllowTable = func(t validate.TableRef) bool {
			ok := g.allowsRef(d, t)
			if !ok && denied == nil {
				denied = &t
			}
			return ok
		}
	}
	_, err := validate.Check(sqlText, opts)
	var ve *validate.Error
	switch {
	case err == nil:
		return nil
	case denied != nil:
		return &lakegate.Error{Kind: lakegate.KindForbidden,
			Message: fmt.Sprintf("table %s of database %q is not open to %s", denied, g.db, g.who),
			Hint:    g.deniedHint(d, *denied), Err: err}
	case errors.As(err, &ve) && ve.ServerInfo != "":
		return g.infoRefusal(ve)
	case ve != nil && ve.Function != "":
		// A function off the allow list: perhaps a typo of a common one.
		r := refusal(err)
		name := ve.Function
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:]
		}
		if dym := DidYouMean(name, functionNames(d, name)); dym != "" {
			r.Hint = dym + " " + r.Hint
		}
		return r
	}
	return refusal(err)
}

// infoRefusal explains a server-information function refused by the
// server_info_functions policy.
func (g *grant) infoRefusal(ve *validate.Error) *lakegate.Error {
	at := ""
	if ve.Line > 0 {
		at = fmt.Sprintf(" (line %d, column %d)", ve.Line, ve.Col)
	}
	if g.serverInfo == config.ServerInfoNone {
		return &lakegate.Error{Kind: lakegate.KindValidation,
			Message: fmt.Sprintf("the SQL was refused: %s; the server_info_functions setting is %q: no caller may use it%s", ve.Reason, g.serverInfo, at),
			Hint:    "remove " + ve.ServerInfo + "; an operator may set server_info_functions to admin or all", Err: ve}
	}
	return &lakegate.Error{Kind: lakegate.KindForbidden,
		Message: fmt.Sprintf("the SQL was refused: %s; the server_info_functions setting is %q: only the %s role may use it%s", ve.Reason, g.serverInfo, lakegate.RoleAdmin, at),
		Hint:    "remove " + ve.ServerInfo + ", or use a token with the admin role; an operator may set server_info_functions to all", Err: ve}
}

// allowsRef matches a table named in SQL against the table list. An
// unqualified PostgreSQL name is taken as the public schema's (the
// default search_path); SQLite names ignore case, as SQLite does.
func (g *grant) allowsRef(d Dialect, t validate.TableRef) bool {
	if d == SQLite {
		if t.Schema != "" && !strings.EqualFold(t.Schema, "main") {
			return false
		}
		for name := range g.tables {
			if strings.EqualFold(name, t.Name) {
				return true
			}
		}
		return false
	}
	name := t.Name
	if t.Schema != "" && t.Schema != "public" {
		name = t.Schema + "." + t.Name
	}
	return g.tables[name]
}

// checkAccess validates the access rules against the databases opened:
// every database a rule names must exist, every PostgreSQL role be a plain
// name (config.ValidPGRole).
func (e *Engine) checkAccess() error {
	for role, a := range e.opts.Access {
		for _, db := range a.Databases {
			if _, ok := e.sources[db]; !ok {
				return lakegate.Errorf(lakegate.KindValidation, "access rule of role %q names database %q, which is not configured (configured: %s)",
					role, db, strings.Join(e.names, ", "))
			}
		}
		for db := range a.Tables {
			if _, ok := e.sources[db]; !ok {
				return lakegate.Errorf(lakegate.KindValidation, "access rule of role %q lists tables of database %q, which is not configured (configured: %s)",
					role, db, strings.Join(e.names, ", "))
			}
		}
		if a.PGRole != "" && !config.ValidPGRole(a.PGRole) {
			return lakegate.Errorf(lakegate.KindValidation, "access rule of role %q: pg_role %q is not a plain PostgreSQL role name", role, a.PGRole)
		}
	}
	return nil
}
