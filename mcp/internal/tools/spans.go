package tools

import (
	"context"

	"github.com/lakegate/lakegate/blocktransport"
	"github.com/lakegate/lakegate/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// startBlockWrite starts the span of writing a block transfer; the spill
// ends it (endBlockWrite) when it commits or aborts.
func startBlockWrite(ctx context.Context, format string) trace.Span {
	_, span := telemetry.Start(ctx, "block write", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.TransferFormat.String(format))
	}
	return span
}

// endBlockWrite ends a block write span with its transfer's manifest, or
// failed with err (nil and no manifest: aborted).
func endBlockWrite(span trace.Span, m *blocktransport.Manifest, err error) {
	if span.IsRecording() {
		if m == nil && err == nil {
			span.SetAttributes(telemetry.TransferAborted.Bool(true))
		}
		if m != nil {
			span.SetAttributes(telemetry.TransferID.String(m.ID), telemetry.TransferBlocks.Int(len(m.Blocks)),
				telemetry.TransferBytes.Int64(m.Bytes), telemetry.TransferRows.Int64(m.Rows))
		}
		telemetry.Fail(span, err)
	}
	span.End()
}
