// Package lakegate is the kernel every layer shares: the error taxonomy
// (Kind, Error, its one JSON body ErrorBody and DecodeError, its reader),
// caller identity (Caller, WithCaller, CallerFrom) and role names, log
// keys, and the files built into the binary (DefaultTools). Each edge
// renders errors its own way: internal/httperr over HTTP, mcp as JSON-RPC
// errors and tool results.
//
// It imports nothing of lakegate's and no net/http, and every package may
// import it. The host/plugin contract is package host's.
package lakegate

import _ "embed"

// DefaultTools is the repository's tools.json: the MCP tool declarations
// used unless mcp_config_dir holds a tools.json of its own.
//
//go:embed tools.json
var DefaultTools []byte
