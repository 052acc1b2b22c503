package tools

import (
	"context"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/query"
)

// callerDatabases is implemented by engines that narrow the database list
// to what a caller may use (*query.Engine, with access rules).
type callerDatabases interface {
	DatabasesFor(c lakegate.Caller) []query.Database
}

var _ callerDatabases = (*query.Engine)(nil)

// DatabasesFor lists the databases of e that c may use.
func DatabasesFor(e Engine, c lakegate.Caller) []query.Database {
	if ce, ok := e.(callerDatabases); ok {
		return ce.DatabasesFor(c)
	}
	return e.Databases()
}

// Engine is what the tools need of the query engine (*query.Engine).
type Engine interface {
	Databases() []query.Database
	Tables(ctx context.Context, c lakegate.Caller, db string) ([]query.Table, error)
	Describe(ctx context.Context, c lakegate.Caller, db, table string) (*query.Table, error)
	PrepareQuery(ctx context.Context, c lakegate.Caller, r query.Request) (*query.Stmt, error)
	PrepareSQL(ctx context.Context, c lakegate.Caller, r query.SQLRequest) (*query.Stmt, error)
}
