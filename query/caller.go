package query

import (
	"context"
	"slices"
	"time"
)

type callerKey struct{}

// WithCaller returns a context carrying c, so that layers which only see a
// context (MCP tool handlers) learn who asks.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller stored by WithCaller, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// HasRole reports whether the caller holds role. The admin role holds every role.
func (c Caller) HasRole(role string) bool {
	return slices.Contains(c.Roles, role) || slices.Contains(c.Roles, "admin")
}

type timeoutKey struct{}

// WithStatementTimeout returns a context whose queries run with statement
// timeout d instead of the engine's default (a tool declared with its own
// timeout). d <= 0 keeps the default.
func WithStatementTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, timeoutKey{}, d)
}

// statementTimeout is the timeout set by WithStatementTimeout, else def.
func statementTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d
	}
	return def
}
