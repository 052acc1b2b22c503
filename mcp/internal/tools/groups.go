package tools

import (
	"fmt"
	"regexp"
	"slices"
)

// A tools.json may declare groups: each is a protocol server of its own,
// served at /mcp/{name} (Streamable HTTP), /mcp/{name}/sse (legacy
// HTTP+SSE) and by `lakegate stdio --group name`, offering only the tools
// it names (each still filtered by its roles), the prompts it names and,
// unless it says "resources": false, the table schema resources. /mcp
// itself serves every declared tool. A group is how an operator gives one
// agent a small, fitting toolset (a dashboard agent: the time series; an
// analyst: the SQL tools) without a second server.

// Group declares one group.
type Group struct {
	Name string `json:"name"`
	// Instructions replace the server's instructions to the model for
	// this group's sessions (empty: the default ones).
	Instructions string   `json:"instructions,omitempty"`
	Tools        []string `json:"tools"`
	// Prompts names the prompts the group offers; absent: all of them
	// (Load fills them in).
	Prompts *[]string `json:"prompts,omitempty"`
	// Resources says whether the group offers the databases and table
	// schema resources; absent: it does. Result blocks are always offered.
	Resources *bool `json:"resources,omitempty"`
}

var groupName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// reservedGroups are the path segments /mcp already uses.
var reservedGroups = []string{"sse", "messages", "blocks", "jobs"}

// OffersResources says whether the group offers the databases and table
// schema resources.
func (g Group) OffersResources() bool { return g.Resources == nil || *g.Resources }

// checkGroups checks the groups a file declares against its tools and
// the prompts there are, and gives a group that names no prompts all of
// them; a problem names the group's line.
func checkGroups(data []byte, groups []Group, tools []Spec, prompts []string) error {
	seen := map[string]bool{}
	for i, g := range groups {
		where := fmt.Sprintf("groups[%d]", i)
		if g.Name != "" {
			where += " (" + g.Name + ")"
		}
		fail := func(format string, args ...any) error {
			return atLine(data, elementOffset(data, "groups", i), fmt.Errorf(where+": "+format, args...))
		}
		switch {
		case !groupName.MatchString(g.Name):
			return fail("name must be 1-64 lower-case letters, digits, _ or -, starting with a letter or digit")
		case slices.Contains(reservedGroups, g.Name):
			return fail("name %q is a route of /mcp already; reserved: %v", g.Name, reservedGroups)
		case seen[g.Name]:
			return fail("name is declared twice")
		case len(g.Tools) == 0:
			return fail("tools: name at least one tool")
		}
		seen[g.Name] = true
		for _, n := range g.Tools {
			if !slices.ContainsFunc(tools, func(t Spec) bool { return t.Name == n }) {
				return fail("tool %q is not declared in tools", n)
			}
		}
		if g.Prompts == nil {
			all := slices.Clone(prompts)
			groups[i].Prompts = &all
		}
		for _, n := range *groups[i].Prompts {
			if !slices.Contains(prompts, n) {
				return fail("prompt %q: want one of %v", n, prompts)
			}
		}
	}
	return nil
}
