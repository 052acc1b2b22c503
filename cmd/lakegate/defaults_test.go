package main

import (
	"testing"
	"time"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/config"
)

// config declares every setting's default once; query and mcp name
// config's declarations. blocktransport, a library for clients too, keeps
// its own (it does not import config): they must never drift apart.
func TestDefaultsAgree(t *testing.T) {
	c := config.Default()
	for _, d := range []struct {
		name        string
		config, pkg any
	}{
		{"mcp_block_size / blocktransport", c.MCPBlockSize, int64(blocktransport.DefaultBlockSize)},
		{"mcp_block_ttl / blocktransport", time.Duration(c.MCPBlockTTL), blocktransport.DefaultTTL},
	} {
		if d.config != d.pkg {
			t.Errorf("%s: config says %v, the package %v", d.name, d.config, d.pkg)
		}
	}
}
