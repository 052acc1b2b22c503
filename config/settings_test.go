package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSettingsCoverEveryField fails when a Config field is added without
// what makes it a setting: a file key, a one-line help, an environment
// variable that Load reads into it (and, if structured, an example).
func TestSettingsCoverEveryField(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	settings := Settings()
	if len(settings) != typ.NumField() {
		t.Errorf("got %d settings for %d Config fields, want one per field (a json tag on each)", len(settings), typ.NumField())
	}
	seen := map[string]bool{}
	for _, s := range settings {
		t.Run(s.Key, func(t *testing.T) {
			if seen[s.Env] {
				t.Errorf("%s is used twice", s.Env)
			}
			seen[s.Env] = true
			if s.Env != "LAKEGATE_"+strings.ToUpper(s.Key) {
				t.Errorf("got env %s, want LAKEGATE_%s", s.Env, strings.ToUpper(s.Key))
			}
			if s.Help == "" || strings.ContainsAny(s.Help, "\n|`") || len(s.Help) > 100 {
				t.Errorf("help %q: want one line of at most 100 characters, no | or backquote (add a help tag to the field)", s.Help)
			}
			f := typ.FieldByIndex(s.index)
			structured := f.Type.Kind() == reflect.Map || f.Type.Kind() == reflect.Struct
			if structured != (s.Example != "") {
				t.Errorf("example %q: want one exactly when the setting is structured (JSON)", s.Example)
			}
			val := sampleEnv(t, f.Type, s)
			c := Default()
			if err := c.applyEnv(env(map[string]string{s.Env: val})); err != nil {
				t.Fatalf("%s=%s: %v", s.Env, val, err)
			}
			got := reflect.ValueOf(c).FieldByIndex(s.index).Interface()
			if def := reflect.ValueOf(Default()).FieldByIndex(s.index).Interface(); reflect.DeepEqual(got, def) {
				t.Errorf("%s=%s left %s at its default %v", s.Env, val, s.Key, def)
			}
		})
	}
}

// sampleEnv is a value of s's variable that differs from its default.
func sampleEnv(t *testing.T, typ reflect.Type, s Setting) string {
	switch typ {
	case reflect.TypeFor[Duration]():
		return "7s"
	case reflect.TypeFor[[]Database]():
		return "x=sqlite:x.db"
	}
	switch typ.Kind() {
	case reflect.String:
		return "sample"
	case reflect.Bool:
		if s.Default == "true" {
			return "false"
		}
		return "true"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "7"
	case reflect.Slice:
		return "a,b"
	case reflect.Map, reflect.Struct:
		return s.Example
	}
	t.Fatalf("%s: no sample for type %s: teach applyEnv (and this test) the type", s.Key, typ)
	return ""
}

// TestLoadReadsOnlySettings: every variable Load asks for is a setting's,
// LAKEGATE_CONFIG or LAKEGATE_DATABASE_URL: no hand-kept list on the side.
func TestLoadReadsOnlySettings(t *testing.T) {
	want := []string{EnvConfig, "LAKEGATE_DATABASE_URL"}
	for _, s := range Settings() {
		want = append(want, s.Env)
	}
	var got []string
	if _, err := Load("", func(k string) string { got = append(got, k); return "" }); err != nil {
		t.Fatal(err)
	}
	for _, k := range got {
		if !slices.Contains(want, k) {
			t.Errorf("Load read %s, which is no setting's variable", k)
		}
	}
	for _, k := range want {
		if !slices.Contains(got, k) {
			t.Errorf("Load did not read %s", k)
		}
	}
}

func TestSettingsDefaults(t *testing.T) {
	want := map[string]string{
		"listen":              DefaultListen,
		"mcp_block_ttl":       "15m",
		"idle_timeout":        "2m",
		"mcp_keepalive":       "30s",
		"rate_limit_rps":      "50",
		"mcp_enabled":         "false",
		"metrics_auth":        "true",
		"mcp_block_threshold": "10485760",
		"jwt_secret":          "generated per run when no other way in is set",
		"mcp_allowed_origins": "",
		"access":              "",
	}
	for _, s := range Settings() {
		if w, ok := want[s.Key]; ok && s.Default != w {
			t.Errorf("%s: got default %q, want %q", s.Key, s.Default, w)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for in, want := range map[string]string{"15m0s": "15m", "2h0m0s": "2h", "1m30s": "1m30s", "10s": "10s", "1.5s": "1.5s", "0s": "0s", "100ms": "100ms"} {
		if got := formatDefault(reflect.ValueOf(mustDuration(t, in))); got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}

func mustDuration(t *testing.T, s string) Duration {
	t.Helper()
	var d Duration
	if err := d.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLoadConfigFromEnv(t *testing.T) {
	fromEnv := writeFile(t, "env.json", `{"listen": "127.0.0.1:1"}`)
	fromFlag := writeFile(t, "flag.yaml", "listen: 127.0.0.1:2\n")
	for _, tc := range []struct {
		name, file, env, want string
	}{
		{"LAKEGATE_CONFIG", "", fromEnv, "127.0.0.1:1"},
		{"the flag wins", fromFlag, fromEnv, "127.0.0.1:2"},
		{"neither", "", "", DefaultListen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.file, env(map[string]string{EnvConfig: tc.env}))
			if err != nil || c.Listen != tc.want {
				t.Errorf("got %q, %v, want %q, nil", c.Listen, err, tc.want)
			}
		})
	}
	if _, err := Load("", env(map[string]string{EnvConfig: fromEnv + ".missing"})); err == nil || !strings.Contains(err.Error(), "env.json.missing") {
		t.Errorf("got %v, want an error naming the missing file", err)
	}
}

// TestREADMEConfigurationTable: README's configuration table has a row for
// every setting and none other, with its environment variable and default.
func TestREADMEConfigurationTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README has no ## Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type row struct{ env, def string }
	rows := map[string]row{}
	code := regexp.MustCompile("`([^`]+)`")
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "/"), "|")
		if len(cells) != 6 {
			t.Errorf("README: want 4 cells in %q", line)
			continue
		}
		cells = cells[1:5]
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("README: %s has two rows", m[1])
			}
			rows[m[1]] = row{cells[1], cells[2]}
		}
	}
	for _, s := range Settings() {
		r, ok := rows[s.Key]
		if !ok {
			t.Errorf("README: no row for %s (%s, default %q: %s)", s.Key, s.Env, s.Default, s.Help)
			continue
		}
		delete(rows, s.Key)
		if !strings.Contains(r.env, "`"+s.Env+"`") {
			t.Errorf("README: %s: got environment %q, want it to name `%s`", s.Key, r.env, s.Env)
		}
		var want string
		switch {
		case s.described:
			want = s.Default
		case s.Default == "":
			want = "none"
		default:
			want = "`" + s.Default + "`"
		}
		if !strings.Contains(r.def, want) {
			t.Errorf("README: %s: got default %q, want it to contain %s", s.Key, r.def, want)
		}
	}
	for k := range rows {
		t.Errorf("README: row %s is no setting", k)
	}
}
