// Package mcp is lakegate's Model Context Protocol plugin, built on the
// go-sdk protocol server and cut along the SDK's seams:
//
//   - the tools (package internal/tools): the declarations of tools.json
//     and the handlers of their tools, each run with only what it needs
//     (the query engine, the answer settings, the block transfers and
//     sessions through small interfaces, the workers); they know nothing
//     of HTTP routing;
//   - the transports (package internal/transport): Streamable HTTP at
//     /mcp (around go-sdk's handlers), legacy HTTP+SSE at /mcp/sse and
//     /mcp/messages/, and stdio (StdioTransport); like go-sdk's handlers
//     they get the protocol server through a function and never see the
//     tools or the query engine;
//   - the sessions (transport.Sessions): their owners and limits, reply
//     budgets, and the drain at shutdown;
//   - the block transfers a large result goes on to (blockRoutes): their
//     routes under BlocksPath, their resources, and in a cluster the
//     forwarding of another replica's sessions and transfers;
//   - the catalog (table schema resources, kept current) and the prompts;
//   - Plugin, the composition root, whose methods are the host's
//     contract: Mount, Enable and Disable, Status, sessions, transfers,
//     Shutdown and Close.
//
// What the parts share lives in internal/wire (the error renderings,
// correlation headers and block URIs; no gin) and internal/route (an HTTP
// route's error answer and a cluster's forwarding); internal/mcptest is
// their tests' support. TestSeams holds the parts to what they may import.
//
// It mounts on any gin.IRouter and learns who calls from the request
// context (lakegate.CallerFrom); Origin is checked on every HTTP route.
// It must not import lakegate's server package.
package mcp
