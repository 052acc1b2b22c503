package tools

import (
	"strings"
	"testing"

	"github.com/lakegate/lakegate/mcp/internal/mcptest"
)

// TestGroupsDeclared: the checks of a groups declaration, each naming the
// group and its line.
func TestGroupsDeclared(t *testing.T) {
	for _, tc := range []struct {
		group map[string]any
		want  string
	}{
		{map[string]any{"name": "Sensors", "tools": []string{"run_sql"}}, "lower-case"},
		{map[string]any{"name": "sse", "tools": []string{"run_sql"}}, "is a route of /mcp"},
		{map[string]any{"name": "x", "tools": []string{}}, "name at least one tool"},
		{map[string]any{"name": "x", "tools": []string{"nope"}}, `tool "nope" is not declared`},
		{map[string]any{"name": "x", "tools": []string{"run_sql"}, "prompts": []string{"nope"}}, `prompt "nope"`},
		{map[string]any{"name": "x", "tools": []string{"run_sql"}, "roles": []string{"admin"}}, `unknown field "roles"`},
	} {
		_, err := parseTools(mcptest.GroupsFile(t, map[string]any{"name": "ok", "tools": []string{"run_sql"}}, tc.group), testPrompts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%v: got %v, want %q with a line", tc.group, err, tc.want)
		}
	}
	_, err := parseTools(mcptest.GroupsFile(t, map[string]any{"name": "x", "tools": []string{"run_sql"}}, map[string]any{"name": "x", "tools": []string{"run_sql"}}), testPrompts)
	if err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Errorf("a group declared twice: got %v", err)
	}
}
