package telemetry

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP protobuf encoding of spans, field by field as
// opentelemetry-proto's collector/trace/v1, trace/v1, common/v1 and
// resource/v1 define them, and as the official exporter's transform
// (otlptrace/internal/tracetransform) fills them: a test decodes both with
// the generated types and compares. Written with protowire alone, so that
// no generated descriptors (nor gRPC, which the generated collector
// package imports) are linked into the binary: their init-time heap and
// globals made every GC cycle of a small server dearer whether traces were
// on or not.

// Field numbers.
const (
	fExportResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fRSResource   = 1 // ResourceSpans.resource
	fRSScopeSpans = 2 // ResourceSpans.scope_spans
	fRSSchemaURL  = 3 // ResourceSpans.schema_url

	fResAttributes = 1 // Resource.attributes

	fSSScope     = 1 // ScopeSpans.scope
	fSSSpans     = 2 // ScopeSpans.spans
	fSSSchemaURL = 3 // ScopeSpans.schema_url

	fScopeName       = 1 // InstrumentationScope.name
	fScopeVersion    = 2 // InstrumentationScope.version
	fScopeAttributes = 3 // InstrumentationScope.attributes

	fSpanTraceID       = 1
	fSpanSpanID        = 2
	fSpanTraceState    = 3
	fSpanParentSpanID  = 4
	fSpanName          = 5
	fSpanKind          = 6
	fSpanStart         = 7
	fSpanEnd           = 8
	fSpanAttributes    = 9
	fSpanDroppedAttrs  = 10
	fSpanEvents        = 11
	fSpanDroppedEvents = 12
	fSpanLinks         = 13
	fSpanDroppedLinks  = 14
	fSpanStatus        = 15
	fSpanFlags         = 16

	fEventTime         = 1
	fEventName         = 2
	fEventAttributes   = 3
	fEventDroppedAttrs = 4

	fLinkTraceID      = 1
	fLinkSpanID       = 2
	fLinkAttributes   = 4
	fLinkDroppedAttrs = 5
	fLinkFlags        = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKVKey   = 1
	fKVValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values, KeyValueList.values
)

// SpanFlags bits beside the W3C trace flags.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encodeSpans appends the ExportTraceServiceRequest of spans to b: one
// ResourceSpans per resource, one ScopeSpans per scope within it, in the
// order they first appear.
func encodeSpans(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scopes []instrumentation.Scope
		spans  [][]sdktrace.ReadOnlySpan
	}
	var groups []*group
	byRes := map[attribute.Distinct]*group{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		key := s.Resource().Equivalent()
		g := byRes[key]
		if g == nil {
			g = &group{res: s.Resource()}
			byRes[key] = g
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		i := 0
		for i < len(g.scopes) && !sameScope(g.scopes[i], sc) {
			i++
		}
		if i == len(g.scopes) {
			g.scopes = append(g.scopes, sc)
			g.spans = append(g.spans, nil)
		}
		g.spans[i] = append(g.spans[i], s)
	}
	for _, g := range groups {
		b = appendMessage(b, fExportResourceSpans, func(b []byte) []byte {
			if g.res != nil {
				b = appendMessage(b, fRSResource, func(b []byte) []byte {
					iter := g.res.Iter()
					for iter.Next() {
						b = appendKeyValue(b, fResAttributes, iter.Attribute())
					}
					return b
				})
			}
			for i, sc := range g.scopes {
				b = appendMessage(b, fRSScopeSpans, func(b []byte) []byte {
					if sc.Name != "" || sc.Version != "" || sc.SchemaURL != "" || sc.Attributes.Len() > 0 {
						b = appendMessage(b, fSSScope, func(b []byte) []byte {
							b = appendString(b, fScopeName, sc.Name)
							b = appendString(b, fScopeVersion, sc.Version)
							iter := sc.Attributes.Iter()
							for iter.Next() {
								b = appendKeyValue(b, fScopeAttributes, iter.Attribute())
							}
							return b
						})
					}
					for _, s := range g.spans[i] {
						b = appendMessage(b, fSSSpans, func(b []byte) []byte { return appendSpan(b, s) })
					}
					return appendString(b, fSSSchemaURL, sc.SchemaURL)
				})
			}
			if g.res != nil {
				b = appendString(b, fRSSchemaURL, g.res.SchemaURL())
			}
			return b
		})
	}
	return b
}

// sameScope compares scopes as the official transform's map keys do.
func sameScope(a, b instrumentation.Scope) bool {
	return a.Name == b.Name && a.Version == b.Version && a.SchemaURL == b.SchemaURL && a.Attributes.Equals(&b.Attributes)
}

func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, fSpanTraceID, tid[:])
	b = appendBytes(b, fSpanSpanID, sid[:])
	b = appendString(b, fSpanTraceState, sc.TraceState().String())
	parent := s.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, fSpanParentSpanID, psid[:])
	}
	b = appendString(b, fSpanName, s.Name())
	b = appendVarint(b, fSpanKind, uint64(spanKind(s.SpanKind())))
	b = appendFixed64(b, fSpanStart, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, fSpanEnd, unixNano(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = appendKeyValue(b, fSpanAttributes, kv)
	}
	b = appendVarint(b, fSpanDroppedAttrs, uint64(clampUint32(s.DroppedAttributes())))
	for _, e := range s.Events() {
		b = appendMessage(b, fSpanEvents, func(b []byte) []byte {
			b = appendFixed64(b, fEventTime, unixNano(e.Time.UnixNano()))
			b = appendString(b, fEventName, e.Name)
			for _, kv := range e.Attributes {
				b = appendKeyValue(b, fEventAttributes, kv)
			}
			return appendVarint(b, fEventDroppedAttrs, uint64(clampUint32(e.DroppedAttributeCount)))
		})
	}
	b = appendVarint(b, fSpanDroppedEvents, uint64(clampUint32(s.DroppedEvents())))
	for _, l := range s.Links() {
		b = appendMessage(b, fSpanLinks, func(b []byte) []byte {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			b = appendBytes(b, fLinkTraceID, ltid[:])
			b = appendBytes(b, fLinkSpanID, lsid[:])
			for _, kv := range l.Attributes {
				b = appendKeyValue(b, fLinkAttributes, kv)
			}
			b = appendVarint(b, fLinkDroppedAttrs, uint64(clampUint32(l.DroppedAttributeCount)))
			return appendFixed32(b, fLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, fSpanDroppedLinks, uint64(clampUint32(s.DroppedLinks())))
	st := s.Status()
	b = appendMessage(b, fSpanStatus, func(b []byte) []byte {
		b = appendString(b, fStatusMessage, st.Description)
		return appendVarint(b, fStatusCode, uint64(statusCode(st.Code)))
	})
	return appendFixed32(b, fSpanFlags, spanFlags(sc.TraceFlags(), parent))
}

// spanFlags are the W3C flags with "whether the parent is remote is known"
// and, if so, "it is remote".
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

func spanKind(k trace.SpanKind) int {
	switch k {
	case trace.SpanKindInternal:
		return 1
	case trace.SpanKindServer:
		return 2
	case trace.SpanKindClient:
		return 3
	case trace.SpanKindProducer:
		return 4
	case trace.SpanKindConsumer:
		return 5
	}
	return 0
}

func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func clampUint32(v int) uint32 {
	if v < 0 {
		return 0
	}
	return uint32(min(int64(v), math.MaxUint32))
}

// appendKeyValue appends a KeyValue message as field num.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	return appendMessage(b, num, func(b []byte) []byte {
		b = appendString(b, fKVKey, string(kv.Key))
		return appendMessage(b, fKVValue, func(b []byte) []byte { return appendAnyValue(b, kv.Value) })
	})
}

// appendAnyValue appends the fields of an AnyValue (a oneof: always one
// field, even when zero, except for an empty value).
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, fAnyBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, fAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, fAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		vals := v.AsBoolSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.BoolValue(vals[i]) })
	case attribute.INT64SLICE:
		vals := v.AsInt64Slice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.Int64Value(vals[i]) })
	case attribute.FLOAT64SLICE:
		vals := v.AsFloat64Slice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.Float64Value(vals[i]) })
	case attribute.STRINGSLICE:
		vals := v.AsStringSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return attribute.StringValue(vals[i]) })
	case attribute.SLICE:
		vals := v.AsSlice()
		return appendArray(b, len(vals), func(i int) attribute.Value { return vals[i] })
	case attribute.MAP:
		kvs := v.AsMap()
		return appendMessage(b, fAnyKVList, func(b []byte) []byte {
			for _, kv := range kvs {
				b = appendKeyValue(b, fListValues, kv)
			}
			return b
		})
	case attribute.EMPTY:
		return b
	}
	b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
	return protowire.AppendString(b, "INVALID")
}

// appendArray appends an ArrayValue of n values as AnyValue's array field.
func appendArray(b []byte, n int, at func(int) attribute.Value) []byte {
	return appendMessage(b, fAnyArray, func(b []byte) []byte {
		for i := range n {
			b = appendMessage(b, fListValues, func(b []byte) []byte { return appendAnyValue(b, at(i)) })
		}
		return b
	})
}

// appendMessage appends field num holding the message body writes,
// length-prefixed: the body is written after a one-byte length guess and
// moved when its length needs more bytes.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, 0)
	b = body(b)
	n := len(b) - at - 1
	if size := protowire.SizeVarint(uint64(n)); size > 1 {
		b = append(b, make([]byte, size-1)...)
		copy(b[at+size:], b[at+1:at+1+n])
	}
	protowire.AppendVarint(b[:at], uint64(n))
	return b
}

// appendString appends a string field, left out when empty (proto3).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendBytes appends a bytes field, left out when empty (proto3).
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendVarint appends a varint field, left out when zero (proto3).
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendFixed64 appends a fixed64 field, left out when zero (proto3).
func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendFixed32 appends a fixed32 field, left out when zero (proto3).
func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}
