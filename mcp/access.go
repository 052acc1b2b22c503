package mcp

import (
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
