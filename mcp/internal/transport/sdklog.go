package transport

import (
	"context"
	"log/slog"
)

// SDKLogger is log as go-sdk gets it: the SDK's Info records are Debug.
// They tell of its own lifecycle (a server connecting, a session connected
// and disconnected, a notification sent), which over stateless Streamable
// HTTP is three lines for every request, and which lakegate's own logs
// already tell where it matters (a session opened, a call, a request).
// Its warnings and errors stay as they are.
func SDKLogger(log *slog.Logger) *slog.Logger { return slog.New(quieter{log.Handler()}) }

// quieter is a handler whose Info records are Debug.
type quieter struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (q quieter) Enabled(ctx context.Context, l slog.Level) bool {
	return q.Handler.Enabled(ctx, demote(l))
}

func (q quieter) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return q.Handler.Handle(ctx, r)
}

func (q quieter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quieter{q.Handler.WithAttrs(attrs)}
}

func (q quieter) WithGroup(name string) slog.Handler { return quieter{q.Handler.WithGroup(name)} }
