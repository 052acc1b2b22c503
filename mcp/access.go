package mcp

import "github.com/lakegate/lakegate/query"

// callerDatabases is implemented by engines that narrow the database list
// to what a caller may use (*query.Engine, with access rules).
type callerDatabases interface {
	DatabasesFor(c query.Caller) []query.Database
}

var _ callerDatabases = (*query.Engine)(nil)

// databasesFor lists the databases c may use.
func (p *Plugin) databasesFor(c query.Caller) []query.Database {
	if e, ok := p.engine.(callerDatabases); ok {
		return e.DatabasesFor(c)
	}
	return p.engine.Databases()
}
