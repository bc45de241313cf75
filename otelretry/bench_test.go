package otelretry

import (
	"net/http"
	"testing"

	"github.com/retryhttp/retryhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
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
		{"bare", func() http.RoundTripper { return &retryhttp.Transport{Base: &memBase{}} }},
		{"noop", func() http.RoundTripper {
			return NewTransport(&retryhttp.Transport{Base: &memBase{}},
				WithTracerProvider(tracenoop.NewTracerProvider()), WithMeterProvider(metricnoop.NewMeterProvider()))
		}},
		{"sdk", func() http.RoundTripper {
			return NewTransport(&retryhttp.Transport{Base: &memBase{}},
				WithTracerProvider(sdktrace.NewTracerProvider()),
				WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := bc.rt()
			req, err := http.NewRequest(http.MethodGet, "http://svc.test/items", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
