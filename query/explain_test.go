package query

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lakegate/lakegate"
)

func TestExplainSQLite(t *testing.T) {
	e, _ := sqliteEngine(t, nil)
	p, err := e.Explain(t.Context(), lakegate.Caller{}, "lite", "SELECT * FROM readings WHERE device_id = 3 AND ts > '2025-01-02';", false, "")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := p.Plan.(string)
	if p.Format != "text" || !strings.HasPrefix(text, "QUERY PLAN\n|--") || !strings.Contains(text, "readings_device_ts") {
		t.Errorf("got %+v", p)
	}
	p, err = e.Explain(t.Context(), lakegate.Caller{}, "lite", "SELECT count(*) FROM readings r JOIN devices d ON d.id = r.device_id", false, "JSON")
	if err != nil {
		t.Fatal(err)
	}
	steps, ok := p.Plan.([]planStep)
	if !ok || len(steps) < 2 || p.Format != "json" {
		t.Errorf("got %#v", p.Plan)
	}
	for _, tc := range []struct {
		name, sql string
		analyze   bool
		format    string
		caller    lakegate.Caller
		kind      lakegate.Kind
	}{
		{"write", "DELETE FROM readings", false, "", lakegate.Caller{}, lakegate.KindValidation},
		{"explain inside", "EXPLAIN SELECT 1", false, "", lakegate.Caller{}, lakegate.KindValidation},
		{"analyze on sqlite", "SELECT 1", true, "", lakegate.Caller{Roles: []string{"admin"}}, lakegate.KindValidation},
		{"analyze as reader", "SELECT 1", true, "", lakegate.Caller{Roles: []string{"reader"}}, lakegate.KindForbidden},
		{"bad format", "SELECT 1", false, "xml", lakegate.Caller{}, lakegate.KindValidation},
		{"empty", " ; ", false, "", lakegate.Caller{}, lakegate.KindValidation},
		{"unknown table", "SELECT * FROM nope", false, "", lakegate.Caller{}, lakegate.KindValidation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Explain(t.Context(), tc.caller, "lite", tc.sql, tc.analyze, tc.format)
			wantKind(t, err, tc.kind)
		})
	}
	_, err = e.Explain(t.Context(), lakegate.Caller{}, "nope", "SELECT 1", false, "")
	wantKind(t, err, lakegate.KindNotFound)
}

func TestExplainPostgres(t *testing.T) {
	e := pgEngine(t, nil)
	ctx := t.Context()
	p, err := e.Explain(ctx, lakegate.Caller{Roles: []string{"reader"}}, "pg", "SELECT * FROM readings WHERE id = 5", false, "text")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := p.Plan.(string); !strings.Contains(s, "readings_pkey") || strings.Contains(s, "actual time") {
		t.Errorf("got %v", p.Plan)
	}
	p, err = e.Explain(ctx, lakegate.Caller{}, "pg", "SELECT status, count(*) FROM readings GROUP BY status", false, "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc []map[string]any
	if raw, ok := p.Plan.(json.RawMessage); !ok || json.Unmarshal(raw, &doc) != nil || doc[0]["Plan"] == nil {
		t.Errorf("got %T %v", p.Plan, p.Plan)
	}
	_, err = e.Explain(ctx, lakegate.Caller{Roles: []string{"reader"}}, "pg", "SELECT 1", true, "text")
	wantKind(t, err, lakegate.KindForbidden)

	admin := lakegate.Caller{Subject: "root", Roles: []string{"admin"}}
	p, err = e.Explain(ctx, admin, "pg", "SELECT count(*) FROM readings", true, "text")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := p.Plan.(string); !strings.Contains(s, "actual time") || !p.Analyze {
		t.Errorf("analyze: got %v", p.Plan)
	}
	p, err = e.Explain(ctx, admin, "pg", "SELECT id FROM readings LIMIT 3", true, "json")
	if err != nil || !strings.Contains(string(p.Plan.(json.RawMessage)), `"Actual Rows"`) {
		t.Errorf("analyze json: got %v %v", p, err)
	}
	// What the validator refuses never reaches EXPLAIN ANALYZE; what it
	// lets through runs read-only and is rolled back.
	for _, sql := range []string{
		"DELETE FROM sink", "INSERT INTO sink (id) VALUES (99)", "SELECT 1; DELETE FROM sink",
		"WITH x AS (DELETE FROM sink RETURNING 1) SELECT * FROM x", "SELECT nextval('s')",
	} {
		_, err := e.Explain(ctx, admin, "pg", sql, true, "text")
		wantKind(t, err, lakegate.KindValidation)
	}
	if _, rows := collectSQL(t, e, lakegate.Caller{}, SQLRequest{Database: "pg", SQL: "SELECT count(*) FROM readings"}); rows[0][0] != int64(1000) {
		t.Errorf("readings after explain analyze: got %v, want 1000", rows[0][0])
	}
}
