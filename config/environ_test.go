package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestCheckEnviron(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		ignore  []string
		want    []string // in the error; none: no error
	}{
		{"settings and others pass", []string{"PATH=/bin", "LAKEGATE_MCP_ENABLED=true", "LAKEGATE_CONFIG=x", "LAKEGATE_DATABASE_URL=postgres://h/db", "LAKEGATE_TOKEN=t"}, nil, nil},
		{"a misspelled setting", []string{"LAKEGATE_MCP_ENABLD=true"}, nil,
			[]string{`unknown environment variable LAKEGATE_MCP_ENABLD (did you mean "LAKEGATE_MCP_ENABLED"?)`, "ignore_env"}},
		{"every unknown one, sorted", []string{"LAKEGATE_ZZZ_QQQ=1", "LAKEGATE_LISTN=:1"}, nil,
			[]string{`LAKEGATE_LISTN (did you mean "LAKEGATE_LISTEN"?), LAKEGATE_ZZZ_QQQ:`}},
		{"ignored by name", []string{"LAKEGATE_MYTOOL=1"}, []string{"LAKEGATE_MYTOOL"}, nil},
		{"ignored by prefix", []string{"LAKEGATE_TEST_DATABASE_URL=x", "LAKEGATE_TEST_PG_CTL=y"}, []string{"LAKEGATE_TEST_*"}, nil},
		{"a prefix is not a name", []string{"LAKEGATE_TESTX=1"}, []string{"LAKEGATE_TEST"}, []string{"LAKEGATE_TESTX"}},
		{"other prefixes pass", []string{"LAKEGATEX=1", "XLAKEGATE_FOO=1"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckEnviron(tt.environ, tt.ignore, "LAKEGATE_TOKEN")
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestFileAndEnvironmentAgree: a value reads the same from the file and
// from the environment, or is refused by both in the same words.
func TestFileAndEnvironmentAgree(t *testing.T) {
	tests := []struct{ key, value, yaml string }{
		{"statement_timeout", "5", "5"},
		{"statement_timeout", "1m30s", "1m30s"},
		{"statement_timeout", "0.5", "0.5"},
		{"statement_timeout", "soon", "soon"},
		{"mcp_trace", "true", "true"},
		{"mcp_trace", "1", "1"},
		{"mcp_max_workers", "7", "7"},
		{"mcp_max_workers", "7.5", "7.5"},
		{"mcp_block_threshold", "10MB", "10MB"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			fromFile, ferr := Load(writeFile(t, "c.yaml", tt.key+": "+tt.yaml+"\n"), env(nil))
			fromEnv, eerr := Load("", env(map[string]string{"LAKEGATE_" + strings.ToUpper(tt.key): tt.value}))
			if (ferr == nil) != (eerr == nil) {
				t.Fatalf("file: %v; environment: %v; want both to accept or both to refuse", ferr, eerr)
			}
			if ferr != nil {
				fw := ferr.Error()[strings.Index(ferr.Error(), "want "):]
				ew := eerr.Error()[strings.Index(eerr.Error(), "want "):]
				if fw != ew {
					t.Errorf("file says %q, environment %q: want the same words", fw, ew)
				}
				return
			}
			if !reflect.DeepEqual(fromFile, fromEnv) {
				t.Errorf("file and environment read %q differently", tt.value)
			}
		})
	}
}
