package mcp

import (
	"context"
	"errors"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lakegate/lakegate/query"
)

// ServeStdio runs one MCP session over t (mcpsdk.StdioTransport in the
// binary) with the same tools, prompts and resources as the HTTP routes.
// There is no HTTP authentication on stdio: every call runs as caller, the
// identity the operator configured. It returns when the client closes its
// side (nil) or ctx ends (ctx.Err()). It ignores Enable/Disable: running
// the stdio command is the operator's choice. The caller of ServeStdio
// still Closes the plugin.
func (p *Plugin) ServeStdio(ctx context.Context, t mcpsdk.Transport, caller query.Caller) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return query.Errorf(query.KindUnavailable, "server is shutting down")
	}
	p.stdio++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.stdio--
		p.mu.Unlock()
	}()
	p.log.Info("mcp stdio session opened", "subject", caller.Subject)
	err := p.server.Run(query.WithCaller(ctx, caller), t)
	p.log.Info("mcp stdio session ended")
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = nil
	}
	return err
}
