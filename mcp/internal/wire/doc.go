// Package wire holds what the MCP plugin's parts (the composition root in
// package mcp, the tools and the transports) share about what reaches a
// client: the error renderings of the one taxonomy (lakegate.Error) for
// each edge, the correlation headers a request's extra carries, how a
// result refers to its block transfers, and how what a client sends is
// read before go-sdk reads it (Parse, with go-sdk's own decoder). It is a leaf: it must not import
// gin, lakegate's query or server packages, or any other part of mcp.
package wire
