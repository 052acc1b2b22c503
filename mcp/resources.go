package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lakegate/lakegate"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource URIs.
const (
	databasesURI   = "lakegate://databases"
	schemaTemplate = "lakegate://databases/{db}/tables/{table}/schema"
)

// catalogCaller is who the catalog check lists tables as.
var catalogCaller = lakegate.Caller{Subject: "lakegate-catalog", Roles: []string{lakegate.RoleReader}}

// addResources registers lakegate://databases and the table schema
// template. The catalog check (catalogCheck) adds one concrete schema
// resource per table, so that resources/list pages through every table.
func (p *Plugin) addResources() {
	p.server.AddResource(&mcpsdk.Resource{
		URI:         databasesURI,
		Name:        "databases",
		Title:       "Databases",
		Description: "The databases lakegate serves, with their dialect.",
		MIMEType:    "application/json",
	}, p.readDatabases)
	p.server.AddResourceTemplate(&mcpsdk.ResourceTemplate{
		URITemplate: schemaTemplate,
		Name:        "table-schema",
		Title:       "Table schema",
		Description: "Columns, keys and row estimate of one table.",
		MIMEType:    "application/json",
	}, p.readSchema)
}

func (p *Plugin) readDatabases(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	caller, _ := lakegate.CallerFrom(ctx)
	return jsonResource(req.Params.URI, map[string]any{"databases": p.databasesFor(caller)})
}

func (p *Plugin) readSchema(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	uri := req.Params.URI
	db, table, ok := parseSchemaURI(uri)
	if !ok {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	caller, _ := lakegate.CallerFrom(ctx)
	t, err := p.engine.Describe(ctx, caller, db, table)
	if err != nil {
		return nil, resourceErr("describe", uri, err)
	}
	return jsonResource(uri, t)
}

// resourceErr answers a failed resources/read: not_found as the protocol's
// resource-not-found error, anything else with the taxonomy's message.
func resourceErr(what, uri string, err error) error {
	if lakegate.KindOf(err) == lakegate.KindNotFound {
		return mcpsdk.ResourceNotFoundError(uri)
	}
	return fmt.Errorf("%s %s: %s", what, uri, NewErrorBody(err).Message)
}

func jsonResource(uri string, v any) (*mcpsdk.ReadResourceResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", uri, err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: uri, MIMEType: "application/json", Text: string(data)},
	}}, nil
}

func schemaURI(db, table string) string {
	return "lakegate://databases/" + url.PathEscape(db) + "/tables/" + url.PathEscape(table) + "/schema"
}

// parseSchemaURI reads lakegate://databases/{db}/tables/{table}/schema.
func parseSchemaURI(uri string) (db, table string, ok bool) {
	rest, found := strings.CutPrefix(uri, "lakegate://databases/")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "tables" || parts[3] != "schema" {
		return "", "", false
	}
	db, err1 := url.PathUnescape(parts[0])
	table, err2 := url.PathUnescape(parts[2])
	if err1 != nil || err2 != nil || db == "" || table == "" {
		return "", "", false
	}
	return db, table, true
}

// firstSyncTimeout bounds one catalog check.
const firstSyncTimeout = 5 * time.Second

// catalogCheck is receiving middleware: before a request is handled, it
// checks the catalog when the last check is older than CatalogInterval
// (always, the first time, so the first resources/list is complete). The
// check rides on client traffic, bounded by firstSyncTimeout, so the plugin
// runs no goroutine of its own; concurrent requests wait for one check.
func (p *Plugin) catalogCheck(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		p.syncMu.Lock()
		if p.lastSync.IsZero() || time.Since(p.lastSync) >= p.opts.CatalogInterval {
			p.lastSync = time.Now()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), firstSyncTimeout)
			p.syncCatalog(sctx)
			cancel()
		}
		p.syncMu.Unlock()
		return next(ctx, method, req)
	}
}

// syncCatalog lists the tables of every database and adds or removes the
// concrete schema resources; the SDK then sends
// notifications/resources/list_changed to the open sessions. A database
// that cannot be listed keeps its resources until it answers again.
func (p *Plugin) syncCatalog(ctx context.Context) {
	want := map[string]*mcpsdk.Resource{}
	failed := map[string]bool{}
	for _, db := range p.engine.Databases() {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		tables, err := p.engine.Tables(lctx, catalogCaller, db.Name)
		cancel()
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
	p.catalogMu.Lock()
	defer p.catalogMu.Unlock()
	if p.catalog == nil {
		p.catalog = map[string]bool{}
	}
	var gone []string
	for uri := range p.catalog {
		db, _, _ := parseSchemaURI(uri)
		if want[uri] == nil && !failed[db] {
			gone = append(gone, uri)
		}
	}
	slices.Sort(gone)
	if len(gone) > 0 {
		p.server.RemoveResources(gone...)
		for _, uri := range gone {
			delete(p.catalog, uri)
		}
	}
	for uri, r := range want {
		if !p.catalog[uri] {
			p.server.AddResource(r, p.readSchema)
			p.catalog[uri] = true
		}
	}
}

// catalogURIs lists the table schema resources currently registered.
func (p *Plugin) catalogURIs() []string {
	p.catalogMu.Lock()
	defer p.catalogMu.Unlock()
	uris := make([]string, 0, len(p.catalog))
	for uri := range p.catalog {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	return uris
}
