// Package lakegate is the kernel every layer shares: the error taxonomy
// (Kind, Error, its one JSON body ErrorBody, and the HTTP status of each
// kind), caller identity (Caller, WithCaller, CallerFrom) and role names,
// and the files built into the binary (DefaultTools).
//
// It imports nothing of lakegate's, and every package may import it.
package lakegate

import _ "embed"

// DefaultTools is the repository's tools.json: the MCP tool declarations
// used unless mcp_config_dir holds a tools.json of its own.
//
//go:embed tools.json
var DefaultTools []byte
