// Package mcp is lakegate's Model Context Protocol plugin: the transports
// (Streamable HTTP at /mcp, legacy HTTP+SSE at /mcp/sse, stdio), the
// sessions and their owners, Origin checks, the tool registry read from
// tools.json and the tool handlers, prompts, resources, progress and
// logging, on top of the go-sdk protocol server.
//
// It mounts on any gin.IRouter and learns who calls from the request
// context (lakegate.CallerFrom). It must not import lakegate's server package.
package mcp
