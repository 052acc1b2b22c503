package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate"
)

// LogHandler wraps h so that a line logged with a context holding a valid
// span (slog's ...Context methods, Logger.Log) carries its trace id and span
// id (lakegate.LogTraceID, lakegate.LogSpanID): one query over the logs
// then finds the lines of a trace. Lines without such a context pass as
// they are.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(lakegate.LogTraceID, sc.TraceID().String()), slog.String(lakegate.LogSpanID, sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
