package otelretry_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/otelretry"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A client whose retries show in traces and metrics. Here they go to an
// in-memory exporter and a reader; a program sets its exporters up once, as
// global providers, and needs no option.
func ExampleNewTransport() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(200)))
	defer srv.Close()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()

	t := &retryhttp.Transport{Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Millisecond)}}
	client := &http.Client{Transport: otelretry.NewTransport(t,
		otelretry.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
		otelretry.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close() // ends the request's span

	for _, s := range spans.GetSpans() { // in the order they ended
		resend := ""
		for _, kv := range s.Attributes {
			if kv.Key == "http.request.resend_count" {
				resend = fmt.Sprintf(" (resend %d)", kv.Value.AsInt64())
			}
		}
		fmt.Printf("%s, %s%s, %d event(s)\n", s.Name, s.SpanKind, resend, len(s.Events))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelretry.MetricAttempts {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					class, _ := dp.Attributes.Value(attribute.Key("retryhttp.status_class"))
					fmt.Printf("%s{%s}: %d\n", m.Name, class.AsString(), dp.Value)
				}
			}
		}
	}
	// Unordered output:
	// HTTP GET, client, 0 event(s)
	// HTTP GET, client (resend 1), 0 event(s)
	// retryhttp GET, internal, 1 event(s)
	// retryhttp.attempts{5xx}: 1
	// retryhttp.attempts{2xx}: 1
}

// The README's example: with the global providers (set once by the
// program, before tr's first use), NewTransport needs no option. (The host
// is made up: this example is compiled, not run.)
func ExampleNewTransport_globalProviders() {
	getThings := func() error {
		tr := &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 3}}
		client := &http.Client{Transport: otelretry.NewTransport(tr)} // global providers; before tr's first use
		resp, err := client.Get("https://api.example.com/v1/things")
		if err != nil {
			return err // the request's span is an error, with a retryhttp.give_up event
		}
		defer resp.Body.Close() // ends the spans
		// One otelhttp CLIENT span per attempt, retries marked http.request.resend_count; a request
		// retried or given up on also gets "retryhttp GET" (INTERNAL), with each wait an event.
		// Metrics: retryhttp.attempts, .retries, .give_ups, .budget.waits, .budget.denials,
		// .throttle.rejections, .retry.delay (s), by method and server.address (at most 100 hosts).
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := getThings(); err != nil {
		log.Print(err)
	}
}
