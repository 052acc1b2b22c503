package lakegate

import (
	"context"
	"slices"
)

// The roles a caller may hold. The admin role holds every role.
const (
	RoleReader = "reader"
	RoleWriter = "writer"
	RoleAdmin  = "admin"
)

// Roles lists the roles, least to most.
var Roles = []string{RoleReader, RoleWriter, RoleAdmin}

// Caller is who asks, as the edge authenticated it. The zero value is an
// anonymous caller with no roles.
type Caller struct {
	Subject string
	Roles   []string
}

// HasRole reports whether the caller holds role. The admin role holds
// every role.
func (c Caller) HasRole(role string) bool {
	return slices.Contains(c.Roles, role) || slices.Contains(c.Roles, RoleAdmin)
}

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
