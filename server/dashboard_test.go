package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/lakegate/lakegate"
)

// dashboardFile is the Grafana dashboard shipped for operators.
const dashboardFile = "../docs/grafana/lakegate.json"

// dashboard is the part of a Grafana dashboard's JSON the checks read.
type dashboard struct {
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []dashPanel `json:"panels"`
	Templating    struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *dashDatasource `json:"datasource"`
	GridPos    *struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []dashTarget `json:"targets"`
	// Panels are a collapsed row's.
	Panels []dashPanel `json:"panels"`
}

type dashTarget struct {
	RefID      string          `json:"refId"`
	Expr       string          `json:"expr"`
	Datasource *dashDatasource `json:"datasource"`
}

type dashDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *dashDatasource `json:"datasource"`
}

// promQuery is a variable's query: a string, or {"query": "..."} as
// Grafana 10 and later write it.
func (v dashVariable) promQuery() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// allPanels is every panel, those inside collapsed rows too.
func (d *dashboard) allPanels() []dashPanel {
	var out []dashPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// PromQL, read just enough to find the series an expression names (the
// Prometheus query parser is not in this module's graph, and is too large
// to bring in for a test). What is not a series name is removed first:
// string literals (label values, regexps), label matchers, range and
// subquery brackets, the label lists of by/without/on/ignoring/group_*,
// Grafana variables and numbers with their units; of the identifiers left,
// those followed by "(" are functions and the rest are series unless they
// are keywords.
var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promBrackets  = regexp.MustCompile(`\[[^\[\]]*\]`)
	promLabelList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promVariables = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promNumbers   = regexp.MustCompile(`\b\d[0-9A-Za-z_.]*`)
	promIdents    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right",
		"offset", "bool", "and", "or", "unless", "atan2", "inf", "nan"}
	// labelValues is a variable query label_values(EXPR, label); the
	// one-argument form names no series.
	labelValues = regexp.MustCompile(`^\s*label_values\s*\((.*),\s*[A-Za-z_]\w*\s*\)\s*$`)
)

// seriesIn returns the series names expr uses, in order, once each.
func seriesIn(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promBrackets.ReplaceAllString(s, " ")
	s = promLabelList.ReplaceAllString(s, " ")
	s = promVariables.ReplaceAllString(s, " ")
	s = promNumbers.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promIdents.FindAllStringSubmatch(s, -1) {
		name := m[0]
		if m[1] != "" || slices.Contains(promKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

// seriesSet is what a server exports: the families of a scrape, and the
// names its scrape-time collector describes (emitted only when the server
// has what they measure: a PostgreSQL pool, a block store).
type seriesSet struct {
	scraped   map[string]*dto.MetricFamily
	described map[string]bool
}

// has reports whether name is a series of the set: a family scraped, a
// histogram's _bucket, _sum or _count (a summary's _sum or _count), or a
// name the collector describes.
func (s seriesSet) has(name string) bool {
	if s.scraped[name] != nil || s.described[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || s.scraped[base] == nil {
			continue
		}
		switch s.scraped[base].GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return true
			}
		}
	}
	return false
}

// checkExpr returns a problem for each series expr names that s does not
// have, or one if it names none at all.
func checkExpr(where, expr string, s seriesSet) []string {
	names := seriesIn(expr)
	if len(names) == 0 {
		return []string{fmt.Sprintf("%s: %q names no series", where, expr)}
	}
	var problems []string
	for _, n := range names {
		if !s.has(n) {
			problems = append(problems, fmt.Sprintf("%s: %s is not a series lakegate exports", where, n))
		}
	}
	return problems
}

// checkSeries returns a problem for every query of d (panel targets and
// variable queries) that names a series s does not have, or none at all.
func checkSeries(d *dashboard, s seriesSet) []string {
	var problems []string
	check := func(where, expr string) {
		problems = append(problems, checkExpr(where, expr, s)...)
	}
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			check(fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := v.promQuery()
		if m := labelValues.FindStringSubmatch(q); m != nil {
			q = m[1]
		}
		check("variable "+v.Name, q)
	}
	return problems
}

// describedByCollector is the names the scrape-time collector describes.
func describedByCollector(t *testing.T) map[string]bool {
	t.Helper()
	fqName := regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*")`)
	ch := make(chan *prometheus.Desc)
	go func() {
		stateCollector{}.Describe(ch) // reads no server
		close(ch)
	}()
	out := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		name, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		out[name] = true
	}
	return out
}

// exportedSeries starts a server as the binary wires it, makes a few REST
// requests and MCP tool calls (one failing) so that labelled series
// appear, and returns what it exports.
func exportedSeries(t *testing.T) seriesSet {
	t.Helper()
	w := startWired(t, nil)
	reader := token("alice", lakegate.RoleReader)
	if r := w.do(t, "GET", "/rest/databases/demo/tables", reader, ""); r.code != http.StatusOK {
		t.Fatalf("tables: got %d %s", r.code, r.body)
	}
	if r := w.do(t, "POST", "/rest/sql", reader, sqlJSON(t, "demo", "SELECT id FROM devices ORDER BY id", 3)); r.code != http.StatusOK {
		t.Fatalf("sql: got %d %s", r.code, r.body)
	}
	cs := w.sse(t, reader)
	callOK(t, cs, "list_tables", map[string]any{"database": "demo"})
	toolError(t, cs, "describe_table", map[string]any{"database": "demo", "table": "nope"})
	return seriesSet{scraped: scrape(t, w), described: describedByCollector(t)}
}

// TestDashboardSeries checks that every query of the Grafana dashboard
// names series a real server exports. Names that only the scrape-time
// collector's descriptions account for (the PostgreSQL pool, the block
// store: this server has neither) are logged. The cases after the shipped
// dashboard show the check failing.
func TestDashboardSeries(t *testing.T) {
	set := exportedSeries(t)
	shipped := loadDashboard(t)
	var byDescription []string
	for _, p := range shipped.allPanels() {
		for _, tg := range p.Targets {
			for _, n := range seriesIn(tg.Expr) {
				if set.scraped[n] == nil && set.described[n] && !slices.Contains(byDescription, n) {
					byDescription = append(byDescription, n)
				}
			}
		}
	}
	if len(byDescription) > 0 {
		t.Logf("not in this scrape, checked against the collector's descriptions: %s", strings.Join(byDescription, ", "))
	}

	for _, tc := range []struct {
		name string
		expr string // "": the dashboard as shipped; else added as a panel
		want []string
	}{
		{name: "the dashboard as shipped"},
		{name: "a bogus series", expr: `sum by (tool) (rate(lakegate_tool_calls_total{job=~"$job"}[$__rate_interval]))`,
			want: []string{"lakegate_tool_calls_total is not a series"}},
		{name: "a histogram suffix on a counter", expr: `rate(lakegate_mcp_tool_calls_total_count[5m])`,
			want: []string{"lakegate_mcp_tool_calls_total_count is not a series"}},
		{name: "a histogram suffix on a gauge", expr: `lakegate_workers_max_bucket`,
			want: []string{"lakegate_workers_max_bucket is not a series"}},
		{name: "two bogus series, one real", expr: `lakegate_nope_a / on (instance) group_left lakegate_workers_max + lakegate_nope_b`,
			want: []string{"lakegate_nope_a is not a series", "lakegate_nope_b is not a series"}},
		{name: "no series at all", expr: `vector(1) * 60`, want: []string{`names no series`}},
		{name: "label names, strings, durations and keywords are not series",
			expr: `histogram_quantile(0.95, sum by (tool, le) (rate(lakegate_mcp_tool_call_duration_seconds_bucket{tool=~"lakegate_bogus|run_sql", outcome!='x'}[5m] offset 1h))) > bool 0.5 and on (instance) lakegate_mcp_enabled unless ignoring (le) lakegate_workers_max`},
		{name: "a summary's count", expr: `rate(go_gc_duration_seconds_count[5m])`},
		{name: "a name the collector describes", expr: `lakegate_db_pool_connections{state="max"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := loadDashboard(t)
			if tc.expr != "" {
				d.Panels = append(d.Panels, dashPanel{ID: 9999, Title: "case", Targets: []dashTarget{{RefID: "Z", Expr: tc.expr}}})
			}
			got := checkSeries(d, set)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems %q, want %d: %q", len(got), got, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.Contains(got[i], want) || !strings.Contains(got[i], `panel 9999 "case" target Z`) {
					t.Errorf("problem %d: got %q, want one about panel 9999 containing %q", i, got[i], want)
				}
			}
		})
	}
}

// TestDashboardJSON checks the dashboard is one Grafana imports as it is:
// a Prometheus datasource variable every panel and query uses, job and
// instance variables, unique panel ids, a grid position for each panel.
func TestDashboardJSON(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: want both", d.Title, d.UID)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (datasource references by uid)", d.SchemaVersion)
	}
	vars := map[string]dashVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("variable datasource: got %+v, want a datasource variable of type prometheus", v)
	}
	for _, name := range []string{"job", "instance"} {
		v, ok := vars[name]
		if !ok || v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" || v.promQuery() == "" {
			t.Errorf("variable %s: got %+v, want a query variable on ${datasource}", name, v)
		}
	}
	ids := map[int]string{}
	panels := d.allPanels()
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		if p.Title == "" {
			t.Errorf("panel %d: no title", p.ID)
		}
		if p.ID <= 0 {
			t.Errorf("panel %q: id %d, want a positive id", p.Title, p.ID)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if g := p.GridPos; g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v, want one within the 24 columns", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a query without expr or refId: %+v", p.Title, tg)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s: datasource %+v, want ${datasource}", p.Title, tg.RefID, tg.Datasource)
			}
			for _, v := range []string{`job=~"$job"`, `instance=~"$instance"`} {
				if strings.Count(tg.Expr, v) < len(seriesIn(tg.Expr)) {
					t.Errorf("panel %q query %s: want %s on every series, in %s", p.Title, tg.RefID, v, tg.Expr)
				}
			}
		}
	}
}

// runbookFile holds the alert rules operators are told to set.
const runbookFile = "../docs/operations.md"

// alertRules reads the Prometheus rule groups of the runbook's first YAML
// block that has them.
func alertRules(t *testing.T, markdown string) map[string]string {
	t.Helper()
	for _, block := range strings.Split(markdown, "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		var rules struct {
			Groups []struct {
				Rules []struct {
					Alert string `yaml:"alert"`
					Expr  string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal([]byte(block), &rules); err != nil || len(rules.Groups) == 0 {
			continue
		}
		out := map[string]string{}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				out[r.Alert] = r.Expr
			}
		}
		return out
	}
	t.Fatalf("no YAML block with rule groups in %s", runbookFile)
	return nil
}

// TestDashboardRunbookAlerts checks the runbook's alert rules the same
// way: every series they name is one a real server exports, or up, which
// Prometheus records for each scrape.
func TestDashboardRunbookAlerts(t *testing.T) {
	data, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	set := exportedSeries(t)
	set.described["up"] = true
	rules := alertRules(t, string(data))
	if len(rules) == 0 {
		t.Fatal("no alert rules")
	}
	for name, expr := range rules {
		for _, p := range checkExpr("alert "+name, expr, set) {
			t.Error(p)
		}
	}
	t.Run("a bogus series is reported", func(t *testing.T) {
		md := "```yaml\ngroups:\n  - rules:\n      - alert: X\n        expr: rate(lakegate_nope_total[5m]) > 0 and up == 1\n```\n"
		got := checkExpr("alert X", alertRules(t, md)["X"], set)
		if len(got) != 1 || !strings.Contains(got[0], "lakegate_nope_total is not a series") {
			t.Errorf("got %q, want one problem naming lakegate_nope_total", got)
		}
	})
}

// TestDashboardShowsEveryFamily: every lakegate_ metric family the server
// exports or its collector describes is on some panel of the dashboard.
func TestDashboardShowsEveryFamily(t *testing.T) {
	set := exportedSeries(t)
	shown := map[string]bool{}
	for _, p := range loadDashboard(t).allPanels() {
		for _, tg := range p.Targets {
			for _, n := range seriesIn(tg.Expr) {
				shown[familyOf(n)] = true
			}
		}
	}
	families := map[string]bool{}
	for n := range set.scraped {
		families[familyOf(n)] = true
	}
	for n := range set.described {
		families[familyOf(n)] = true
	}
	for f := range families {
		if strings.HasPrefix(f, "lakegate_") && !shown[f] {
			t.Errorf("%s is on no panel of %s", f, dashboardFile)
		}
	}
}

// familyOf is the metric family of series name n: a histogram's buckets,
// sum and count are its own.
func familyOf(n string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(n, suffix); ok {
			return f
		}
	}
	return n
}
