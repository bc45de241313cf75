package otelretry

// The scaffolding of the tests: an SDK tracer provider that keeps spans in
// memory and an SDK meter provider read by hand, lookups into what they
// recorded, a rendering of a trace for the test log, and an in-memory base
// transport for the tests that need no network (fake time, made-up hosts).

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// telemetry is where a test's spans and metrics go.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry() *telemetry {
	tel := &telemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tel.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tel.spans))
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	return tel
}

// options returns the options that send a Transport's telemetry to tel.
func (tel *telemetry) options(more ...Option) []Option {
	return append([]Option{WithTracerProvider(tel.tp), WithMeterProvider(tel.mp)}, more...)
}

// ended returns the spans ended so far.
func (tel *telemetry) ended() tracetest.SpanStubs { return tel.spans.GetSpans() }

// metrics returns otelretry's metrics as the reader collects them now.
func (tel *telemetry) metrics(t *testing.T) metricsOf {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	m := metricsOf{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == ScopeName {
			for _, md := range sm.Metrics {
				m[md.Name] = md
			}
		}
	}
	return m
}

// metricsOf is otelretry's metrics by name.
type metricsOf map[string]metricdata.Metrics

// count returns the sum of counter name's points whose attributes include
// attrs (all of its points without attrs).
func (m metricsOf) count(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0
	}
	sum, ok := md.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", name, md.Data)
	require.True(t, sum.IsMonotonic, "%s is a counter", name)
	var n int64
	for _, dp := range sum.DataPoints {
		if hasAll(dp.Attributes, attrs) {
			n += dp.Value
		}
	}
	return n
}

// values returns the values that counter name's points have for key, with
// the sum of the points of each.
func (m metricsOf) values(t *testing.T, name string, key attribute.Key) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	md, ok := m[name]
	if !ok {
		return out
	}
	sum, ok := md.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, not an int64 sum", name, md.Data)
	for _, dp := range sum.DataPoints {
		v, _ := dp.Attributes.Value(key)
		out[v.String()] += dp.Value
	}
	return out
}

// histogram returns the count and sum of histogram name's points whose
// attributes include attrs.
func (m metricsOf) histogram(t *testing.T, name string, attrs ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0, 0
	}
	h, ok := md.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, not a float64 histogram", name, md.Data)
	var n uint64
	var sum float64
	for _, dp := range h.DataPoints {
		if hasAll(dp.Attributes, attrs) {
			n += dp.Count
			sum += dp.Sum
		}
	}
	return n, sum
}

func hasAll(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// attr returns the value of key among kvs, and whether it is there.
func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// requireAttr fails the test unless kvs hold key with value want.
func requireAttr(t *testing.T, kvs []attribute.KeyValue, key string, want any) {
	t.Helper()
	v, ok := attr(kvs, key)
	require.True(t, ok, "no attribute %s among %v", key, kvs)
	require.Equal(t, want, v.AsInterface(), "attribute %s", key)
}

// requestSpans splits spans into the logical requests' spans (otelretry's)
// and the attempts' (otelhttp's CLIENT spans), each in the order they
// started.
func requestSpans(spans tracetest.SpanStubs) (requests, attempts tracetest.SpanStubs) {
	for _, s := range spans {
		switch {
		case s.InstrumentationScope.Name == ScopeName:
			requests = append(requests, s)
		case s.SpanKind == trace.SpanKindClient:
			attempts = append(attempts, s)
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	slices.SortStableFunc(requests, byStart)
	slices.SortStableFunc(attempts, byStart)
	return requests, attempts
}

// oneRequest returns the spans tel ended, those of one request and n
// attempts: all, the request's span (in a slice), the attempts'. It logs
// the trace, after the words of intro if any.
func oneRequest(t *testing.T, tel *telemetry, n int, intro ...string) (spans, requests, attempts tracetest.SpanStubs) {
	t.Helper()
	spans = tel.ended()
	t.Logf("%s\n%s", strings.Join(intro, " "), render(spans))
	requests, attempts = requestSpans(spans)
	require.Len(t, requests, 1)
	require.Len(t, attempts, n)
	return spans, requests, attempts
}

// requireBesideFirst checks the request's span s made under the caller's
// span: the caller's child, as the first attempt is, linked to it, and
// starting when it did.
func requireBesideFirst(t *testing.T, caller trace.Span, s, first tracetest.SpanStub) {
	t.Helper()
	require.Equal(t, caller.SpanContext().SpanID(), s.Parent.SpanID(), "the request's span is the caller's child")
	require.Equal(t, caller.SpanContext().TraceID(), s.SpanContext.TraceID())
	require.Equal(t, caller.SpanContext().SpanID(), first.Parent.SpanID(), "so is the first attempt's")
	require.Len(t, s.Links, 1)
	require.Equal(t, first.SpanContext, s.Links[0].SpanContext, "the request's span links the first attempt's")
	require.Equal(t, first.StartTime, s.StartTime, "and starts with it")
}

// childrenOf returns the spans whose parent is p.
func childrenOf(spans tracetest.SpanStubs, p tracetest.SpanStub) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Parent.SpanID() == p.SpanContext.SpanID() {
			out = append(out, s)
		}
	}
	return out
}

// render draws the trace of spans as a tree, each span with its kind,
// status, times from the trace's start, attributes and events, for the log
// of a test run with -v.
func render(spans tracetest.SpanStubs) string {
	if len(spans) == 0 {
		return "(no spans)\n"
	}
	start := spans[0].StartTime
	for _, s := range spans {
		if s.StartTime.Before(start) {
			start = s.StartTime
		}
	}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var b strings.Builder
	var draw func(s tracetest.SpanStub, depth int)
	draw = func(s tracetest.SpanStub, depth int) {
		in := strings.Repeat("    ", depth)
		parent := "none"
		if s.Parent.IsValid() {
			parent = s.Parent.SpanID().String()
		}
		fmt.Fprintf(&b, "%s%s [%s] trace=%s span=%s parent=%s status=%s", in, s.Name, s.SpanKind,
			s.SpanContext.TraceID(), s.SpanContext.SpanID(), parent, s.Status.Code)
		if s.Status.Description != "" {
			fmt.Fprintf(&b, " (%q)", s.Status.Description)
		}
		fmt.Fprintf(&b, " %v..%v\n", since(start, s.StartTime), since(start, s.EndTime))
		for _, kv := range sorted(s.Attributes) {
			fmt.Fprintf(&b, "%s    %s = %s\n", in, kv.Key, kv.Value.String())
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, "%s    event %s at %v:", in, e.Name, since(start, e.Time))
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.String())
			}
			b.WriteString("\n")
		}
		kids := childrenOf(spans, s)
		slices.SortStableFunc(kids, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
		for _, k := range kids {
			draw(k, depth+1)
		}
	}
	for _, s := range spans {
		if !s.Parent.IsValid() || !ids[s.Parent.SpanID()] {
			draw(s, 0)
		}
	}
	return b.String()
}

func since(start, t time.Time) time.Duration { return t.Sub(start).Round(10 * time.Microsecond) }

func sorted(kvs []attribute.KeyValue) []attribute.KeyValue {
	out := slices.Clone(kvs)
	slices.SortFunc(out, func(a, b attribute.KeyValue) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return out
}

// unavailable returns a base that answers every request with 503, and once
// a policy that makes one attempt: the Transport gives each request up on
// (ReasonNoRetries, or a method not retried), which gives it a span.
func unavailable() *testutil.Base {
	return &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable)}
}

var once = retryhttp.Policy{MaxAttempts: 1}
