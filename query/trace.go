package query

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/lakegate/lakegate/telemetry"
)

// startSpan starts the client span of one statement Run or Estimate sends
// to the database: named "SELECT db" (or op), with the database system and
// name and the statement's fingerprint, never its text or arguments. With
// tracing off it costs a branch and computes nothing.
func (s *Stmt) startSpan(ctx context.Context, op string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := telemetry.Start(ctx, op+" "+s.Database, trace.SpanKindClient)
	if span.IsRecording() {
		system := "postgresql"
		if s.src.dialect() == SQLite {
			system = "sqlite"
		}
		span.SetAttributes(telemetry.DBSystem.String(system), telemetry.DBName.String(s.Database),
			attribute.String("db.operation.name", op), telemetry.DBQueryFP.String(Fingerprint(s.text)))
	}
	return ctx, span
}

// endSpan ends a Run's span with what came (rows, the bytes of the decoded
// cells, truncation), or failed with err's kind.
func endSpan(span trace.Span, res *Result, bytes int64, err error) {
	if span.IsRecording() {
		if res != nil {
			span.SetAttributes(telemetry.DBRows.Int(res.RowCount), telemetry.DBBytes.Int64(bytes), telemetry.DBTrunc.Bool(res.Truncated))
		}
		telemetry.Fail(span, err)
	}
	span.End()
}

// cellBytes is what a row's cells weigh once decoded: the bytes of text,
// numeric and JSON cells, 8 for the others.
func cellBytes(cells []Cell) int64 {
	var n int64
	for i := range cells {
		switch {
		case cells[i].B != nil:
			n += int64(len(cells[i].B))
		case cells[i].stream != nil: // held as it came on the wire
			n += int64(len(cells[i].stream.raw))
		default:
			n += 8
		}
	}
	return n
}

// Fingerprint names a statement's shape, as PostgreSQL's queryid does: the
// hex of the first 8 bytes of the SHA-256 of its normalized text, where
// every literal (string, dollar-quoted string, number) is "?", comments
// are gone, white space is one space and words outside double quotes are
// lower case. Statements that differ only in their values (and row caps,
// offsets) share a fingerprint; no value can be read back from it, and bind
// parameters never reach it. An unterminated literal hides the rest of the
// text.
func Fingerprint(sqlText string) string {
	sum := sha256.Sum256([]byte(normalizeSQL(sqlText)))
	return hex.EncodeToString(sum[:8])
}

// normalizeSQL is Fingerprint's normal form of sqlText.
func normalizeSQL(q string) string {
	var b strings.Builder
	b.Grow(len(q))
	space := false // white space (or a comment) is pending
	emit := func(s string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(s)
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			space = true
			i++
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
			space = true
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			i = skipBlockComment(q, i)
			space = true
		case c == '\'':
			// E'...' strings take backslash escapes: the E was emitted
			// as a word, so look back at it.
			backslash := i > 0 && (q[i-1] == 'e' || q[i-1] == 'E') && (i == 1 || !isIdentByte(q[i-2]))
			i = skipString(q, i, backslash)
			emit("?")
		case c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == '"' {
					if j+1 < len(q) && q[j+1] == '"' {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			emit(q[i:j])
			i = j
		case c == '$' && i+1 < len(q) && (q[i+1] == '$' || isTagStart(q[i+1])):
			if j, ok := skipDollar(q, i); ok {
				emit("?")
				i = j
				continue
			}
			// A positional parameter ($1): kept, it is no value.
			j := i + 1
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			emit(q[i:j])
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9':
			j := i
			for j < len(q) && (isIdentByte(q[j]) || q[j] == '.' ||
				(q[j] == '+' || q[j] == '-') && j > i && (q[j-1] == 'e' || q[j-1] == 'E')) {
				j++
			}
			emit("?")
			i = j
		case isIdentByte(c):
			j := i
			for j < len(q) && (isIdentByte(q[j]) || q[j] == '$') {
				j++
			}
			emit(strings.ToLower(q[i:j]))
			i = j
		default:
			emit(q[i : i+1])
			i++
		}
	}
	return b.String()
}

// isIdentByte is a byte of an unquoted identifier or keyword (any non-ASCII
// byte counts, as PostgreSQL's identifiers may hold them).
func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// isTagStart is a byte that may start a dollar-quote tag.
func isTagStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// skipBlockComment returns the index after the /* comment at i (nested,
// as PostgreSQL nests them), or len(q).
func skipBlockComment(q string, i int) int {
	depth := 0
	for i < len(q) {
		switch {
		case q[i] == '/' && i+1 < len(q) && q[i+1] == '*':
			depth++
			i += 2
		case q[i] == '*' && i+1 < len(q) && q[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return i
}

// skipString returns the index after the string literal opening at i
// (two quotes in a row are one; with backslash, \ escapes the next byte),
// or len(q).
func skipString(q string, i int, backslash bool) int {
	for j := i + 1; j < len(q); j++ {
		switch {
		case backslash && q[j] == '\\':
			j++
		case q[j] == '\'':
			if j+1 < len(q) && q[j+1] == '\'' {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}

// skipDollar returns the index after the dollar-quoted string ($$...$$ or
// $tag$...$tag$) opening at i; false if no tag opens there.
func skipDollar(q string, i int) (int, bool) {
	j := i + 1
	for j < len(q) && q[j] != '$' {
		if !isIdentByte(q[j]) {
			return 0, false
		}
		j++
	}
	if j >= len(q) {
		return 0, false
	}
	tag := q[i : j+1]
	if k := strings.Index(q[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag), true
	}
	return len(q), true
}
