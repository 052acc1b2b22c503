// Package transport carries the MCP plugin's sessions to and from the
// go-sdk protocol server: Streamable HTTP (Streamable, around go-sdk's
// handlers), legacy HTTP+SSE (SSE, with its bounded connection and reply
// budgets) and stdio (ServeStdio, StdioTransport); the JSON-RPC ids they
// keep exactly as clients wrote them; and the sessions' bookkeeping
// (Sessions): owners and limits, activity, and the drain at shutdown.
//
// Like go-sdk's handlers, the transports get the protocol server through
// a function and never see the tools. It must not import lakegate's
// query or server packages, nor the tools (mcp/internal/tools) or package
// mcp, which composes it.
package transport
