// Package mcp is lakegate's Model Context Protocol plugin: the transports
// (legacy HTTP+SSE for now), the sessions, the tool registry read from
// tools.json and the tool handlers, on top of the go-sdk protocol server.
//
// It mounts on any gin.IRouter and learns who calls from the request
// context (query.CallerFrom). It must not import lakegate's server package.
package mcp
