package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/mcp/internal/tools"
	"github.com/lakegate/lakegate/mcp/internal/wire"
)

// checkTimeout bounds one catalog check.
const checkTimeout = 5 * time.Second

// catalog is the set of table schema resources (their URIs) and the
// check that keeps it current. A check runs in the background, started by
// client traffic when the last is older than CatalogInterval, so the
// plugin has no timer of its own and no request waits for a check. Only
// the first resources/list waits for the first check (at most
// checkTimeout), so that it is complete.
type catalog struct {
	mu      sync.Mutex
	uris    map[string]*mcpsdk.Resource // the table schema resources, by URI
	last    time.Time                   // when the last check started
	running bool
	first   chan struct{} // closed when the first check has ended

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	servers  []*mcpsdk.Server // where the resources are registered (attach); under mu
	engine   Engine
	interval time.Duration // Options.CatalogInterval
	log      *slog.Logger
}

func newCatalog(engine Engine, interval time.Duration, log *slog.Logger) *catalog {
	ctx, cancel := context.WithCancel(context.Background())
	return &catalog{uris: map[string]*mcpsdk.Resource{}, first: make(chan struct{}), ctx: ctx, cancel: cancel,
		engine: engine, interval: interval, log: log}
}

// close stops a running check and waits for it. Cancelling under mu
// orders it after any check startCheck began, so none starts after Wait.
func (c *catalog) close() {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// check is receiving middleware: it starts a catalog check when one
// is due and goes on; a resources/list waits for the first check to end.
func (c *catalog) check(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		c.startCheck()
		if method == "resources/list" {
			select {
			case <-c.first:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next(ctx, method, req)
	}
}

// startCheck starts a catalog check unless one runs or the last is
// recent.
func (c *catalog) startCheck() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.ctx.Err() != nil || (!c.last.IsZero() && time.Since(c.last) < c.interval) {
		return
	}
	c.running, c.last = true, time.Now()
	c.wg.Go(func() {
		ctx, cancel := context.WithTimeout(c.ctx, checkTimeout)
		defer cancel()
		c.sync(ctx)
		c.mu.Lock()
		c.running = false
		select {
		case <-c.first:
		default:
			close(c.first)
		}
		c.mu.Unlock()
	})
}

// sync lists the tables of every database and adds or removes the
// concrete schema resources; the SDK then sends
// notifications/resources/list_changed to the open sessions. A database
// that cannot be listed keeps its resources until it answers again.
func (c *catalog) sync(ctx context.Context) {
	want := map[string]*mcpsdk.Resource{}
	failed := map[string]bool{}
	for _, db := range c.engine.Databases() {
		tables, err := c.engine.Tables(ctx, catalogCaller, db.Name)
		if err != nil {
			failed[db.Name] = true
			if ctx.Err() == nil {
				c.log.Warn("catalog check failed", "database", db.Name, lakegate.LogError, lakegate.NewErrorBody(err).Message)
			}
			continue
		}
		for _, t := range tables {
			uri := schemaURI(db.Name, t.Name)
			want[uri] = &mcpsdk.Resource{
				URI:         uri,
				Name:        db.Name + "." + t.Name,
				Title:       fmt.Sprintf("Schema of %s.%s (%s)", db.Name, t.Name, t.Kind),
				Description: fmt.Sprintf("Columns, keys and row estimate (%d) of %s %s in database %s.", t.RowEstimate, t.Kind, t.Name, db.Name),
				MIMEType:    "application/json",
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []string
	for uri := range c.uris {
		db, _, _ := parseSchemaURI(uri)
		if want[uri] == nil && !failed[db] {
			gone = append(gone, uri)
		}
	}
	slices.Sort(gone)
	if len(gone) > 0 {
		for _, s := range c.servers {
			s.RemoveResources(gone...)
		}
		for _, uri := range gone {
			delete(c.uris, uri)
		}
	}
	for uri, r := range want {
		if c.uris[uri] == nil {
			for _, s := range c.servers {
				s.AddResource(r, c.readSchema)
			}
			c.uris[uri] = r
		}
	}
}

// registered lists the table schema resources currently registered.
func (c *catalog) registered() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.uris))
}

// attach adds lakegate://databases, the table schema template and the
// schema resource of each table known to server, and keeps them current
// there: each catalog check adds and removes one concrete schema resource
// per table, so that resources/list pages through every table.
func (c *catalog) attach(server *mcpsdk.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Contains(c.servers, server) {
		return
	}
	c.servers = append(c.servers, server)
	server.AddResource(&mcpsdk.Resource{
		URI:         databasesURI,
		Name:        "databases",
		Title:       "Databases",
		Description: "The databases lakegate serves, with their dialect.",
		MIMEType:    "application/json",
	}, c.readDatabases)
	server.AddResourceTemplate(&mcpsdk.ResourceTemplate{
		URITemplate: schemaTemplate,
		Name:        "table-schema",
		Title:       "Table schema",
		Description: "Columns, keys and row estimate of one table.",
		MIMEType:    "application/json",
	}, c.readSchema)
	for _, r := range c.uris {
		server.AddResource(r, c.readSchema)
	}
}

// detach removes the catalog's resources from server.
func (c *catalog) detach(server *mcpsdk.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.servers, server)
	if i < 0 {
		return
	}
	c.servers = slices.Delete(c.servers, i, i+1)
	uris := []string{databasesURI}
	for uri := range c.uris {
		uris = append(uris, uri)
	}
	server.RemoveResources(uris...)
	server.RemoveResourceTemplates(schemaTemplate)
}

// readDatabases answers resources/read of lakegate://databases.
func (c *catalog) readDatabases(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	caller, _ := lakegate.CallerFrom(ctx)
	return jsonResource(req.Params.URI, map[string]any{"databases": tools.DatabasesFor(c.engine, caller)})
}

// readSchema answers resources/read of a table schema.
func (c *catalog) readSchema(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	uri := req.Params.URI
	db, table, ok := parseSchemaURI(uri)
	if !ok {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	t, err := c.engine.Describe(ctx, caller, db, table)
	if err != nil {
		return nil, wire.ResourceErr("describe", uri, err)
	}
	return jsonResource(uri, t)
}

// visible is receiving middleware: an answer to resources/list
// keeps only the schema resources of tables the caller may read (the
// catalog check registers every table's).
func (c *catalog) visible(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcpsdk.ListResourcesResult)
		if err != nil || !ok {
			return res, err
		}
		caller, _ := lakegate.CallerFrom(ctx)
		visible := map[string]bool{}
		for _, db := range tools.DatabasesFor(c.engine, caller) {
			tables, err := c.engine.Tables(ctx, caller, db.Name)
			if err != nil {
				continue // an unreachable database shows none of its tables
			}
			for _, t := range tables {
				visible[schemaURI(db.Name, t.Name)] = true
			}
		}
		kept := make([]*mcpsdk.Resource, 0, len(list.Resources))
		for _, r := range list.Resources {
			if _, _, isSchema := parseSchemaURI(r.URI); !isSchema || visible[r.URI] {
				kept = append(kept, r)
			}
		}
		list.Resources = kept
		return list, nil
	}
}
