package mcp

import (
	"context"
	"net/http"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// callerDatabases is implemented by engines that narrow the database list
// to what a caller may use (*query.Engine, with access rules).
type callerDatabases interface {
	DatabasesFor(c lakegate.Caller) []query.Database
}

var _ callerDatabases = (*query.Engine)(nil)

// databasesFor lists the databases of e that c may use.
func databasesFor(e Engine, c lakegate.Caller) []query.Database {
	if ce, ok := e.(callerDatabases); ok {
		return ce.DatabasesFor(c)
	}
	return e.Databases()
}

// hostAuthenticated lets a caller the host authenticated without a bearer
// token (by client certificate) through the SDK's bearer check, which
// reads only the Authorization header: a placeholder token carries the
// request to callerTokenInfo, which ignores the token's text and takes
// the caller from the context. Requests with no caller are left as they
// are (and refused by the SDK).
func hostAuthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if c, ok := lakegate.CallerFrom(r.Context()); ok && c.Subject != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer host-authenticated")
			}
		}
		next.ServeHTTP(w, r)
	})
}

// visibleResources is receiving middleware: an answer to resources/list
// keeps only the schema resources of tables the caller may read (the
// catalog check registers every table's).
func (p *Plugin) visibleResources(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
	return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcpsdk.ListResourcesResult)
		if err != nil || !ok {
			return res, err
		}
		caller, _ := lakegate.CallerFrom(ctx)
		visible := map[string]bool{}
		for _, db := range databasesFor(p.engine, caller) {
			tables, err := p.engine.Tables(ctx, caller, db.Name)
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
