package query

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// Building rollups (an admin's request), listing them, and finding the
// ones a reader's time series may read.

// BuildRollups makes the rollup tables of db's table (every table with
// rollups when table is empty) and fills them from the rows there, each
// resolution in one transaction that holds off ingests into the table.
// A rollup table already there is emptied and filled again: a build also
// takes in rows other programs wrote. It returns at once; RollupBuilds
// follows it. Only one build of a table runs at a time.
func (e *Engine) BuildRollups(db, table string) ([]*RollupBuild, error) {
	src, err := e.source(db)
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, rc := range e.rollupConfigs[db] {
		if (table == "" || rc.Table == table) && !slices.Contains(tables, rc.Table) {
			tables = append(tables, rc.Table)
		}
	}
	if len(tables) == 0 {
		return nil, &lakegate.Error{Kind: lakegate.KindNotFound, Message: fmt.Sprintf("database %q has no rollups of %q configured", db, table),
			Hint: "declare them in the database's rollups setting (README, Rollups)"}
	}
	e.rollups.mu.Lock()
	defer e.rollups.mu.Unlock()
	if e.rollups.builds == nil {
		e.rollups.builds = map[string]*RollupBuild{}
	}
	var out []*RollupBuild
	for _, t := range tables {
		k := db + "\x00" + t
		if b := e.rollups.builds[k]; b != nil && b.State == "building" {
			out = append(out, b)
			continue
		}
		b := &RollupBuild{Database: db, Table: t, State: "building", Started: time.Now()}
		e.rollups.builds[k] = b
		cp := *b
		out = append(out, &cp)
		e.watchers.Go(func() {
			rows, err := e.buildRollups(e.stopping, src, db, t)
			e.rollups.mu.Lock()
			defer e.rollups.mu.Unlock()
			b.TookMS, b.Rows, b.State = time.Since(b.Started).Milliseconds(), rows, "done"
			if err != nil {
				b.State, b.Error = "failed", err.Error()
				e.log.Warn("rollup build failed", logKeyDatabase, db, "table", t, "error", err.Error())
			} else {
				e.log.Info("rollups built", logKeyDatabase, db, "table", t, "took_ms", b.TookMS)
			}
			// The next time series looks again for the rollups.
			for key := range e.rollups.ready {
				if strings.HasPrefix(key, db+"\x00") {
					delete(e.rollups.ready, key)
				}
			}
		})
	}
	return out, nil
}

// buildRollups builds each resolution of table's rollups in turn.
func (e *Engine) buildRollups(ctx context.Context, src source, db, table string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, rollupBuildTimeout)
	defer cancel()
	cat, _, err := e.catalog(ctx, db)
	if err != nil {
		return nil, err
	}
	t, err := cat.table(db, table)
	if err != nil {
		return nil, err
	}
	rows := map[string]int64{}
	for _, rc := range e.rollupConfigs[db] {
		if rc.Table != table {
			continue
		}
		for _, res := range rc.Resolutions {
			r, err := newRollup(src.dialect(), t, rc, res)
			if err != nil {
				return rows, err
			}
			n, err := src.buildRollup(ctx, t, r, e.readerRoles())
			if err != nil {
				return rows, fmt.Errorf("%s: %w", r, err)
			}
			rows[res] = n
		}
	}
	return rows, nil
}

// readerRoles are the PostgreSQL roles callers' reads run as besides the
// connecting user: query_role and the access rules' pg_role.
func (e *Engine) readerRoles() []string {
	var out []string
	if e.opts.QueryRole != "" {
		out = append(out, e.opts.QueryRole)
	}
	for _, a := range e.opts.Access {
		if a.PGRole != "" && !slices.Contains(out, a.PGRole) {
			out = append(out, a.PGRole)
		}
	}
	sort.Strings(out)
	return out
}

// RollupBuilds lists the builds running and the last one of each table.
func (e *Engine) RollupBuilds() []RollupBuild {
	e.rollups.mu.Lock()
	defer e.rollups.mu.Unlock()
	out := make([]RollupBuild, 0, len(e.rollups.builds))
	for _, b := range e.rollups.builds {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Database+"\x00"+out[i].Table < out[j].Database+"\x00"+out[j].Table
	})
	return out
}

// Rollups lists every configured rollup and whether it is built.
func (e *Engine) Rollups(ctx context.Context) []RollupInfo {
	var out []RollupInfo
	for _, db := range e.names {
		for _, rc := range e.rollupConfigs[db] {
			for _, res := range rc.Resolutions {
				info := RollupInfo{Database: db, Table: rc.Table, Resolution: res, TimeColumn: rc.TimeColumn, Keys: rc.Keys, Values: rc.Values}
				cat, src, err := e.catalog(ctx, db)
				var t *tableInfo
				if err == nil {
					t, err = cat.table(db, rc.Table)
				}
				var r *sqlbuild.Rollup
				if err == nil {
					info.Rollup = rollupName(t.rel, res)
					r, err = newRollup(src.dialect(), t, rc, res)
				}
				if err == nil {
					var ok map[string]bool
					ok, err = src.readableRollups(ctx, t, []*sqlbuild.Rollup{r}, "")
					info.Built = ok[r.Table.Rel]
				}
				if err != nil {
					info.Error = err.Error()
				}
				out = append(out, info)
			}
		}
	}
	return out
}

// readyRollups are the rollups of t that a time series of caller g may
// read: built, readable by its PostgreSQL role, of a table without row
// security. What the database answered is kept for catalogTTL.
func (e *Engine) readyRollups(ctx context.Context, g *grant, src source, t *tableInfo) []*sqlbuild.Rollup {
	defs := e.rollupDefs(g.db, t, src.dialect())
	if len(defs) == 0 {
		return nil
	}
	key := g.db + "\x00" + t.Name + "\x00" + g.pgRole
	e.rollups.mu.Lock()
	rr, ok := e.rollups.ready[key]
	e.rollups.mu.Unlock()
	if !ok || time.Since(rr.at) > catalogTTL {
		cctx, cancel := context.WithTimeout(ctx, e.opts.StatementTimeout)
		names, err := src.readableRollups(cctx, t, defs, g.pgRole)
		cancel()
		if err != nil {
			e.log.Warn("rollups not read", logKeyDatabase, g.db, "table", t.Name, "error", err.Error())
			return nil // the source's rows answer
		}
		rr = readyRollups{at: time.Now(), names: names}
		e.rollups.mu.Lock()
		if e.rollups.ready == nil {
			e.rollups.ready = map[string]readyRollups{}
		}
		e.rollups.ready[key] = rr
		e.rollups.mu.Unlock()
	}
	var out []*sqlbuild.Rollup
	for _, r := range defs {
		if rr.names[r.Table.Rel] {
			out = append(out, r)
		}
	}
	return out
}
