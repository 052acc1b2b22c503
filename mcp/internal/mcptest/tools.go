package mcptest

import (
	"encoding/json"
	"testing"

	"github.com/lakegate/lakegate"
)

// GroupsFile is the built-in tools.json with groups added.
func GroupsFile(t testing.TB, groups ...map[string]any) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(lakegate.DefaultTools, &doc); err != nil {
		t.Fatal(err)
	}
	doc["groups"] = groups
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
