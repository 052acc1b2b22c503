package mcp

import (
	"context"
	"encoding/json"
	"iter"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/host"
	"github.com/lakegate/lakegate/mcp/internal/route"
	"github.com/lakegate/lakegate/mcp/internal/tools"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// promptNames are the built-in prompts (prompts.go), which a group may name.
var promptNames = []string{"tool-descriptions", "explore_database", "analyze_table"}

// protoServer is one protocol server: the SDK's, and the declared tools it
// offers now, which a reload changes.
type protoServer struct {
	*mcpsdk.Server
	group string // "" for /mcp

	mu       sync.Mutex
	offered  map[string]string             // tool name → its declaration, as last added
	handlers map[string]mcpsdk.ToolHandler // tool name → what serves its calls (tasks.go)
	prompts  []string                      // the prompts added
	catalog  bool                          // whether the catalog's resources are added
}

// toolNames lists the tools the server offers, sorted.
func (s *protoServer) toolNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.offered))
}

// withdraw removes the tools the server offers that keep does not hold.
func (s *protoServer) withdraw(keep []tools.Spec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for n := range s.offered {
		if !slices.ContainsFunc(keep, func(t tools.Spec) bool { return t.Name == n }) {
			gone = append(gone, n)
			delete(s.offered, n)
			delete(s.handlers, n)
		}
	}
	if len(gone) > 0 {
		s.Server.RemoveTools(gone...)
	}
}

// offer adds the tools of specs that are new or changed since last offered
// (each change: one notifications/tools/list_changed to every session). A
// tool declared as before stays as it is, so that a reload that changes
// nothing tells no session anything.
func (s *protoServer) offer(specs []tools.Spec, handler func(tools.Spec) mcpsdk.ToolHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offered == nil {
		s.offered, s.handlers = map[string]string{}, map[string]mcpsdk.ToolHandler{}
	}
	for _, t := range specs {
		decl, _ := json.Marshal(t)
		if s.offered[t.Name] != string(decl) {
			h := handler(t)
			s.Server.AddTool(t.Tool(), h)
			s.offered[t.Name], s.handlers[t.Name] = string(decl), h
		}
	}
}

// servers holds the protocol servers: main at /mcp, which offers every
// declared tool, and one per declared group. Safe for concurrent use.
type servers struct {
	main *protoServer
	// build makes the protocol server of a group, with no tools.
	build func(g tools.Group) *protoServer
	// handler is what serves one declared tool's calls; declare records
	// the declared tools' roles (tools.Set.Declare).
	handler func(tools.Spec) mcpsdk.ToolHandler
	declare func([]tools.Spec)
	prompts *prompts
	catalog *catalog

	mu     sync.RWMutex
	groups map[string]*protoServer
	specs  []tools.Group // as declared, in order
	source string        // where they were declared
}

// group is the protocol server of group name ("": main).
func (s *servers) group(name string) (*protoServer, bool) {
	if name == "" {
		return s.main, true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ps, ok := s.groups[name]
	return ps, ok
}

// of is the protocol server that is srv (main or a group's), if any.
func (s *servers) of(srv *mcpsdk.Server) (*protoServer, bool) {
	if s.main.Server == srv {
		return s.main, true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ps := range s.groups {
		if ps.Server == srv {
			return ps, true
		}
	}
	return nil, false
}

// tool is what serves calls of the tool name the server offers.
func (s *protoServer) tool(name string) (mcpsdk.ToolHandler, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.handlers[name]
	return h, ok
}

// groupNames lists the declared groups, in their order.
func (s *servers) groupNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, len(s.specs))
	for i, g := range s.specs {
		names[i] = g.Name
	}
	return names
}

// sessions yields the sessions of every protocol server.
func (s *servers) sessions() iter.Seq[*mcpsdk.ServerSession] {
	return func(yield func(*mcpsdk.ServerSession) bool) {
		s.mu.RLock()
		all := make([]*protoServer, 0, 1+len(s.groups))
		all = append(all, s.main)
		for _, ps := range s.groups {
			all = append(all, ps)
		}
		s.mu.RUnlock()
		for _, ps := range all {
			for ss := range ps.Sessions() {
				if !yield(ss) {
					return
				}
			}
		}
	}
}

// apply makes d the declarations served: main offers every tool; each
// group its own, prompts and resources, its server built when the group
// is new. The tools no longer offered go first, then the roles are
// recorded, then the tools are added, so that no tool is ever offered
// wider than declared. The sessions of a group no longer declared are
// closed (their clients' next request is told the group does not exist).
func (s *servers) apply(d *tools.Declarations) {
	s.mu.Lock()
	next := make(map[string]*protoServer, len(d.Groups))
	offers := map[*protoServer][]tools.Spec{s.main: d.Tools}
	for _, g := range d.Groups {
		ps := s.groups[g.Name]
		if ps == nil {
			ps = s.build(g)
		}
		next[g.Name] = ps
		offers[ps] = slices.DeleteFunc(slices.Clone(d.Tools), func(t tools.Spec) bool { return !slices.Contains(g.Tools, t.Name) })
	}
	var gone []*protoServer
	for name, ps := range s.groups {
		if next[name] == nil {
			ps.withdraw(nil)
			s.catalog.detach(ps.Server)
			gone = append(gone, ps)
		}
	}
	for ps, specs := range offers {
		ps.withdraw(specs)
	}
	s.declare(d.Tools)
	for ps, specs := range offers {
		ps.offer(specs, s.handler)
	}
	for _, g := range d.Groups {
		s.offerExtras(next[g.Name], g)
	}
	s.groups, s.specs, s.source = next, d.Groups, d.Source
	s.mu.Unlock()
	for _, ps := range gone {
		for ss := range ps.Sessions() {
			_ = ss.Close()
		}
	}
}

// offerExtras sets the prompts and resources group server ps offers.
func (s *servers) offerExtras(ps *protoServer, g tools.Group) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if want := *g.Prompts; !slices.Equal(ps.prompts, want) {
		if len(ps.prompts) > 0 {
			ps.Server.RemovePrompts(ps.prompts...)
		}
		s.prompts.register(ps.Server, want)
		ps.prompts = slices.Clone(want)
	}
	if want := g.OffersResources(); want != ps.catalog {
		if want {
			s.catalog.attach(ps.Server)
		} else {
			s.catalog.detach(ps.Server)
		}
		ps.catalog = want
	}
}

// serverKey carries the protocol server a request was routed to.
type serverKey struct{}

// getServer is the transports' way to the protocol server: the group's
// that pick put on the request, else main.
func (s *servers) getServer(r *http.Request) *mcpsdk.Server {
	if ps, ok := r.Context().Value(serverKey{}).(*mcpsdk.Server); ok {
		return ps
	}
	return s.main.Server
}

// pick is the middleware of the /mcp/{group} routes: it routes the request
// to the group's server, or answers not_found naming the groups there are.
func (s *servers) pick(c *gin.Context) {
	name := c.Param("group")
	ps, ok := s.group(name)
	if !ok || name == "" {
		c.Abort()
		route.Fail(c, errNoGroup(name, s.groupNames()))
		return
	}
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), serverKey{}, ps.Server))
}

func errNoGroup(name string, groups []string) error {
	e := lakegate.Errorf(lakegate.KindNotFound, "no tool group %q on this server", wire.Excerpt(name))
	if len(groups) == 0 {
		e.Hint = "this server declares no groups: use /mcp for every tool"
	} else {
		e.Hint = "groups: " + strings.Join(groups, ", ") + "; /mcp serves every tool"
	}
	return e
}

// info describes what is served, for operators.
func (s *servers) info() host.ToolsInfo {
	s.mu.RLock()
	source := s.source
	s.mu.RUnlock()
	info := host.ToolsInfo{Source: source, Tools: s.main.toolNames()}
	for _, name := range s.groupNames() {
		if ps, ok := s.group(name); ok {
			info.Groups = append(info.Groups, host.ToolGroup{Name: name, Tools: ps.toolNames()})
		}
	}
	return info
}
