package query

import (
	"context"
	"slices"
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
