package lakegate

// Log keys every package uses for the same things, so that one query over
// the logs finds a request, a caller or a session wherever it was logged.
const (
	LogRequestID = "request_id"
	LogSubject   = "subject"
	LogSessionID = "session_id"
	LogTool      = "tool"
	LogError     = "error"
	LogReason    = "reason"
	LogDuration  = "duration_ms"
	// LogTraceID and LogSpanID are the OpenTelemetry trace and span of the
	// line, when one is recording (package telemetry adds them).
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)
