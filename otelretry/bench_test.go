package otelretry

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// What instrumentation costs a request that succeeds at once, over an
// in-memory base: the bare Transport, instrumented with OpenTelemetry's
// no-op providers (what a program that sets none pays), and with the SDK's
// (every span sampled, metrics aggregated; spans go to no exporter).
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name string
		rt   func() http.RoundTripper
	}{
		{"bare", func() http.RoundTripper { return &retryhttp.Transport{Base: &testutil.Base{}} }},
		{"noop", func() http.RoundTripper {
			return NewTransport(&retryhttp.Transport{Base: &testutil.Base{}},
				WithTracerProvider(tracenoop.NewTracerProvider()), WithMeterProvider(metricnoop.NewMeterProvider()))
		}},
		{"sdk", func() http.RoundTripper {
			return NewTransport(&retryhttp.Transport{Base: &testutil.Base{}},
				WithTracerProvider(sdktrace.NewTracerProvider()),
				WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			testutil.BenchRoundTrip(b, bc.rt(), testutil.NewRequest(b, http.MethodGet, "http://svc.test/items", nil), nil)
		})
	}
}

// BenchmarkOverOtelhttp measures what otelretry costs beyond otelhttp
// alone, for a GET that succeeds on its first attempt, with the SDK's
// providers (every span sampled and handed to a span processor that drops
// it; metrics aggregated for a ManualReader), over a base that answers at
// once with a realistic response: six header fields and a 63-byte JSON
// body, which the caller reads to its end and closes.
//
//	impl=otelhttp   otelhttp.NewTransport(base)
//	impl=otelretry  NewTransport(&retryhttp.Transport{Base: base})
//
// base=memory is that in-memory base, which makes what net/http's
// transport would (the response, its header, its body) and nothing more,
// so that the instrumentation's cost stands out; base=loopback is a real
// connection to a server in the process.
//
// The second includes the retryhttp Transport itself. Besides ns/op, each
// reports cpu-ns/op, the process's CPU time per request (user and system,
// from getrusage, where there is one), which a busy machine's waits do not
// inflate. over.sh runs the two in rounds, each in a process of its own and
// in alternating order, and prints the medians of the per-round ratios:
//
//	bash over.sh
func BenchmarkOverOtelhttp(b *testing.B) {
	impls := []struct {
		name string
		rt   func(base http.RoundTripper, tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper
	}{
		{"impl=otelhttp", func(base http.RoundTripper, tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
			return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))
		}},
		{"impl=otelretry", func(base http.RoundTripper, tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
			return NewTransport(&retryhttp.Transport{Base: base}, WithTracerProvider(tp), WithMeterProvider(mp))
		}},
	}
	b.Run("base=memory", func(b *testing.B) {
		for _, impl := range impls {
			b.Run(impl.name, func(b *testing.B) {
				benchGet(b, "http://svc.test/v1/items/42", func(tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
					return impl.rt(cannedBase{}, tp, mp)
				})
			})
		}
	})
	// The same over a loopback connection, kept alive, to a server in the
	// same process (whose CPU time counts too): what the same cost weighs
	// beside a real connection's.
	b.Run("base=loopback", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			maps.Copy(w.Header(), cannedHeader)
			w.Header().Del("Date") // the server's own
			_, _ = w.Write(cannedBody)
		}))
		defer srv.Close()
		for _, impl := range impls {
			b.Run(impl.name, func(b *testing.B) {
				base := &http.Transport{}
				defer base.CloseIdleConnections()
				benchGet(b, srv.URL+"/v1/items/42", func(tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
					return impl.rt(base, tp, mp)
				})
			})
		}
	})
}

// benchGet measures GETs of url through the RoundTripper that rt makes
// with fresh SDK providers.
func benchGet(b *testing.B, url string, rt func(*sdktrace.TracerProvider, *sdkmetric.MeterProvider) http.RoundTripper) {
	get := getter(b, url, rt)
	get() // the first request's attribute sets, metric streams, connection
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		get()
	}
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}

// getter returns a function that sends a GET of url through the
// RoundTripper that rt makes with fresh SDK providers (every span sampled,
// and dropped once ended; metrics aggregated for a ManualReader), and reads
// the answer's body, cannedBody, to its end and closes it.
func getter(tb testing.TB, url string, rt func(*sdktrace.TracerProvider, *sdkmetric.MeterProvider) http.RoundTripper) func() {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropSpans{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t := rt(tp, mp)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return func() {
		resp, err := t.RoundTrip(req)
		if err != nil {
			tb.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != int64(len(cannedBody)) {
			tb.Fatalf("read %d bytes of the body: %v", n, err)
		}
		resp.Body.Close()
	}
}

// cannedBody is the body of cannedBase's responses.
var cannedBody = []byte(`{"id":42,"name":"widget","price":19.99,"tags":["a","b"],"ok":1}`)

// cannedHeader is the header of cannedBase's responses, copied into each.
var cannedHeader = http.Header{
	"Content-Type":   {"application/json"},
	"Content-Length": {strconv.Itoa(len(cannedBody))},
	"Date":           {"Mon, 02 Mar 2026 10:00:00 GMT"},
	"Server":         {"nginx"},
	"X-Request-Id":   {"7f3c2a9e-1b4d-4e8f-9a6b-2c5d7e8f0a1b"},
	"Cache-Control":  {"no-store"},
}

// cannedBase answers every request at once with 200, cannedHeader and
// cannedBody, making what net/http's transport would make for it: the
// response, its header, its body.
type cannedBase struct{}

func (cannedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: cannedHeader.Clone(), ContentLength: int64(len(cannedBody)),
		Body: &cannedReader{r: *bytes.NewReader(cannedBody)}, Request: req}, nil
}

type cannedReader struct{ r bytes.Reader }

func (c *cannedReader) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *cannedReader) Close() error               { return nil }

// dropSpans is a span processor that drops every span, as a batching one
// would after queueing it: the SDK still takes each ended span's snapshot.
type dropSpans struct{}

func (dropSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropSpans) Shutdown(context.Context) error                  { return nil }
func (dropSpans) ForceFlush(context.Context) error                { return nil }

// A GET that succeeds at once costs one allocation beyond otelhttp's own:
// the request's state, which holds its copy of the request. Neither a span
// of otelretry's nor a body wrapper is made for it.
func TestOneAllocationBeyondOtelhttp(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not exact under the race detector")
	}
	allocs := func(rt func(*sdktrace.TracerProvider, *sdkmetric.MeterProvider) http.RoundTripper) float64 {
		get := getter(t, "http://svc.test/v1/items/42", rt)
		get() // the route, the attribute sets, the metric streams
		return testing.AllocsPerRun(100, get)
	}
	plain := allocs(func(tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
		return otelhttp.NewTransport(cannedBase{}, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))
	})
	ours := allocs(func(tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) http.RoundTripper {
		return NewTransport(&retryhttp.Transport{Base: cannedBase{}}, WithTracerProvider(tp), WithMeterProvider(mp))
	})
	if ours != plain+1 {
		t.Errorf("otelretry: %v allocations a request, otelhttp alone %v; want one more", ours, plain)
	}
}
