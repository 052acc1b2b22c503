package query

import (
	"context"

	"github.com/lakegate/lakegate"
)

// WithCaller is lakegate.WithCaller.
func WithCaller(ctx context.Context, c Caller) context.Context { return lakegate.WithCaller(ctx, c) }

// CallerFrom is lakegate.CallerFrom.
func CallerFrom(ctx context.Context) (Caller, bool) { return lakegate.CallerFrom(ctx) }
