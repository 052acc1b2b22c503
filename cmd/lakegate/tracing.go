package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/lakegate/lakegate"
	"github.com/lakegate/lakegate/telemetry"
)

// tracingFlush bounds the export of the last spans at exit.
const tracingFlush = 5 * time.Second

// startTracing sets up OpenTelemetry traces from the process's OTEL_*
// environment (telemetry.Setup): with no OTLP endpoint set, nothing. The
// caller stops it (stopTracing) once the server and all it built are
// closed.
func startTracing(ctx context.Context, log *slog.Logger) (*telemetry.Tracing, error) {
	return telemetry.Setup(ctx, os.Getenv, &telemetry.Options{Version: version, Logger: log})
}

// stopTracing flushes the spans not yet exported, waiting at most
// tracingFlush, and logs a failure.
func stopTracing(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
	defer cancel()
	if err := t.Close(ctx); err != nil {
		log.Warn("stop tracing", lakegate.LogError, err.Error())
	}
}
