package mcp

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
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
	uris    map[string]bool
	last    time.Time // when the last check started
	running bool
	first   chan struct{} // closed when the first check has ended

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCatalog() *catalog {
	ctx, cancel := context.WithCancel(context.Background())
	return &catalog{uris: map[string]bool{}, first: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// close stops a running check and waits for it. Cancelling under mu
// orders it after any check startCheck began, so none starts after Wait.
func (c *catalog) close() {
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
}

// catalogCheck is receiving middleware: it starts a catalog check when one
// is due and goes on; a resources/list waits for the first check to end.
func (p *Plugin) catalogCheck(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		p.startCheck()
		if method == "resources/list" {
			select {
			case <-p.catalog.first:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next(ctx, method, req)
	}
}

// startCheck starts a catalog check unless one runs or the last is
// recent.
func (p *Plugin) startCheck() {
	c := p.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.ctx.Err() != nil || (!c.last.IsZero() && time.Since(c.last) < p.opts.CatalogInterval) {
		return
	}
	c.running, c.last = true, time.Now()
	c.wg.Go(func() {
		ctx, cancel := context.WithTimeout(c.ctx, checkTimeout)
		defer cancel()
		p.syncCatalog(ctx)
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

// syncCatalog lists the tables of every database and adds or removes the
// concrete schema resources; the SDK then sends
// notifications/resources/list_changed to the open sessions. A database
// that cannot be listed keeps its resources until it answers again.
func (p *Plugin) syncCatalog(ctx context.Context) {
	want := map[string]*mcpsdk.Resource{}
	failed := map[string]bool{}
	for _, db := range p.engine.Databases() {
		tables, err := p.engine.Tables(ctx, catalogCaller, db.Name)
		if err != nil {
			failed[db.Name] = true
			if ctx.Err() == nil {
				p.log.Warn("catalog check failed", "database", db.Name, lakegate.LogError, NewErrorBody(err).Message)
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
	c := p.catalog
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
		p.server.RemoveResources(gone...)
		for _, uri := range gone {
			delete(c.uris, uri)
		}
	}
	for uri, r := range want {
		if !c.uris[uri] {
			p.server.AddResource(r, p.readSchema)
			c.uris[uri] = true
		}
	}
}

// catalogURIs lists the table schema resources currently registered.
func (p *Plugin) catalogURIs() []string {
	c := p.catalog
	c.mu.Lock()
	defer c.mu.Unlock()
	uris := make([]string, 0, len(c.uris))
	for uri := range c.uris {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	return uris
}
