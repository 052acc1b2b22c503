// Package lakegate holds the files built into the lakegate binary.
//
// It imports nothing; cmd/lakegate passes these to the packages that use them.
package lakegate

import _ "embed"

// DefaultTools is the repository's tools.json: the MCP tool declarations
// used unless mcp_config_dir holds a tools.json of its own.
//
//go:embed tools.json
var DefaultTools []byte
