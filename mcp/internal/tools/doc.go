// Package tools runs the MCP plugin's tools: the declarations of
// tools.json (Load: tools, their schemas and roles, and the groups that
// serve some of them), and Set, the handlers of their calls, each run with
// only what it needs: the query engine, the answer settings, the block
// transfers and the sessions through small interfaces (Blocks, Sessions),
// and the workers. It also holds the protocol middleware that keeps tools
// to the callers their roles allow (FilterRoles) and answers an unknown
// tool (UnknownTool).
//
// The tools know nothing of HTTP routing: the transports reach them
// through the protocol server only. It must not import gin, lakegate's
// server package, the transports (mcp/internal/transport) or package mcp,
// which composes it.
package tools
