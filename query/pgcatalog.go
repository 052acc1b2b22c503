package query

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/lakegate/lakegate/query/sqlbuild"
)

// pgNotOwn leaves lakegate's own tables out of a pg_class c joined to
// its pg_namespace n: they are no data of the caller's.
const pgNotOwn = `NOT (n.nspname = 'public' AND c.relname IN ('` + KeyTable + `', 'lakegate_cluster_state', 'lakegate_cluster_replicas'))
  AND c.relname NOT LIKE 'lakegate\_rollup\_%'`

// Catalog queries: non-system schemas, tables, views, materialized views,
// foreign and partitioned tables (partitions are left out).
const (
	pgTablesSQL = `
SELECT c.oid::int8, n.nspname::text, c.relname::text, c.relkind::text, c.reltuples::int8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND ` + pgNotOwn + `
ORDER BY n.nspname, c.relname`
	pgColumnsSQL = `
SELECT a.attrelid::int8, a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       b.typname::text, COALESCE(e.typname::text, '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A'
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY a.attrelid, a.attnum`
	pgKeysSQL = `
SELECT con.conrelid::int8, con.contype::text,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord),
       COALESCE(rn.nspname::text, ''), COALESCE(rc.relname::text, ''),
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord)
FROM pg_constraint con
LEFT JOIN pg_class rc ON rc.oid = con.confrelid
LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE con.contype IN ('p', 'f')
ORDER BY con.conrelid, con.contype, con.conname`
)

// pgName is how requests name a table: unqualified in public.
func pgName(schema, rel string) string {
	if schema == "public" {
		return rel
	}
	return schema + "." + rel
}

// loadCatalog reads the tables on the primary, never a standby: ingest
// checks its rows against the catalog, which must know a table as soon as
// it exists.
func (s *pgSource) loadCatalog(ctx context.Context) ([]*tableInfo, error) {
	tx, err := s.beginRead(ctx, txOptions{primary: true})
	if err != nil {
		return nil, err
	}
	defer rollback(tx)

	byOID := map[int64]*tableInfo{}
	var tables []*tableInfo
	rows, _ := tx.Query(ctx, pgTablesSQL)
	var (
		oid, est          int64
		schema, rel, kind string
	)
	_, err = pgx.ForEachRow(rows, []any{&oid, &schema, &rel, &kind, &est}, func() error {
		t := &tableInfo{schema: schema, rel: rel, Table: Table{
			Schema: schema, Name: pgName(schema, rel), Kind: "table", RowEstimate: max(est, -1)}}
		if kind == "v" || kind == "m" {
			t.Kind, t.RowEstimate = "view", -1
		}
		byOID[oid] = t
		tables = append(tables, t)
		return nil
	})
	if err != nil {
		return nil, err
	}

	var (
		col, typ, base, elem string
		nullable             bool
	)
	rows, _ = tx.Query(ctx, pgColumnsSQL)
	_, err = pgx.ForEachRow(rows, []any{&oid, &col, &typ, &nullable, &base, &elem}, func() error {
		if t := byOID[oid]; t != nil {
			t.Columns = append(t.Columns, Column{Name: col, Type: typ, Nullable: nullable})
			t.types = append(t.types, sqlbuild.PostgresType(base, elem))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var (
		contype, refSchema, refRel string
		keys, refKeys              []string
	)
	rows, _ = tx.Query(ctx, pgKeysSQL)
	_, err = pgx.ForEachRow(rows, []any{&oid, &contype, &keys, &refSchema, &refRel, &refKeys}, func() error {
		t := byOID[oid]
		if t == nil {
			return nil
		}
		if contype == "p" {
			t.PrimaryKey = slices.Clone(keys)
			for i := range t.Columns {
				for _, k := range keys {
					if t.Columns[i].Name == k {
						t.Columns[i].PrimaryKey = true
					}
				}
			}
			return nil
		}
		t.ForeignKeys = append(t.ForeignKeys, ForeignKey{
			Columns: slices.Clone(keys), RefTable: pgName(refSchema, refRel), RefColumns: slices.Clone(refKeys)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tables, nil
}
