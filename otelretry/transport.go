package otelretry

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/retryhttp/retryhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans and metrics
// otelretry makes.
const ScopeName = "github.com/retryhttp/retryhttp/otelretry"

// An Option configures NewTransport.
type Option func(*config)

type config struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	maxHosts int
	known    map[string]bool // nil: defaultMethods
	httpOpts []otelhttp.Option
}

// WithTracerProvider makes the spans with tp, the attempts' spans too.
// Without it, or with nil, the global TracerProvider is used.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider records the metrics with mp, otelhttp's too. Without
// it, or with nil, the global MeterProvider is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithMaxHosts bounds the distinct server.address values of the metrics to
// n (DefaultMaxHosts without this option): the first n hosts a request goes
// to keep their names, the others are recorded as "_OTHER". An n of zero or
// less records every host as "_OTHER". Spans always name the host.
func WithMaxHosts(n int) Option {
	return func(c *config) { c.maxHosts = max(n, 0) }
}

// WithKnownMethods replaces the HTTP methods recorded by name (those of RFC
// 9110 and PATCH, without this option); another method is recorded as
// "_OTHER", its name kept in http.request.method_original on the span.
// Names are case-sensitive.
func WithKnownMethods(methods ...string) Option {
	return func(c *config) {
		c.known = make(map[string]bool, len(methods))
		for _, m := range methods {
			c.known[m] = true
		}
	}
}

// WithHTTPOptions passes opts to otelhttp.NewTransport, which makes the
// attempts' spans (propagators, a span name formatter, filters). They come
// after the tracer and meter providers otelretry gives it, and may replace
// them. A filter that skips a request leaves its attempts without spans.
func WithHTTPOptions(opts ...otelhttp.Option) Option {
	return func(c *config) { c.httpOpts = append(c.httpOpts, opts...) }
}

// NewTransport instruments t and returns the RoundTripper to use in its
// place: it makes a span for each request, otelhttp's span for each
// attempt, and the metrics (see the package doc).
//
// It must be called once, before t's first use: it sets t.Base to otelhttp's
// transport over t.Base (a nil Base becoming the go-cleanhttp pooled
// transport that retryhttp would have made), and sets t.OnRetry and
// t.OnGiveUp to hooks that record each event before calling the hooks
// already set, if any, which then see the request with the span in its
// context. CloseIdleConnections on the returned RoundTripper reaches t's
// base.
//
// A Base that is itself a retryhttp.Transport is still recognized as one
// (the wrapper says what it wraps, with Unwrap): it sends each of t's
// attempts once.
func NewTransport(t *retryhttp.Transport, opts ...Option) http.RoundTripper {
	c := config{maxHosts: DefaultMaxHosts}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	in := newInstruments(&c)
	base := t.Base
	if base == nil {
		base = cleanhttp.DefaultPooledTransport()
	}
	httpOpts := append([]otelhttp.Option{otelhttp.WithTracerProvider(c.tp), otelhttp.WithMeterProvider(c.mp)}, c.httpOpts...)
	t.Base = &attempts{traced: otelhttp.NewTransport(resendCount{base: base}, httpOpts...), base: base, in: in}
	onRetry, onGiveUp := t.OnRetry, t.OnGiveUp
	t.OnRetry = func(e *retryhttp.RetryEvent) {
		in.retry(e)
		if onRetry != nil {
			onRetry(e)
		}
	}
	t.OnGiveUp = func(e *retryhttp.GiveUpEvent) {
		in.giveUp(e)
		if onGiveUp != nil {
			onGiveUp(e)
		}
	}
	return &transport{next: t, in: in}
}

// transport makes the span of each request and sends it through next.
type transport struct {
	next *retryhttp.Transport
	in   *instruments
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, req := t.in.start(req)
	resp, err := t.next.RoundTrip(req)
	return r.finish(resp, err)
}

// CloseIdleConnections closes the idle connections of the Transport's base.
func (t *transport) CloseIdleConnections() { t.next.CloseIdleConnections() }

// attempts is an instrumented Transport's Base: it sends each attempt
// through otelhttp (traced) and counts it.
type attempts struct {
	traced http.RoundTripper // otelhttp's transport over resendCount over base
	base   http.RoundTripper
	in     *instruments
}

func (a *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	r := requestOf(ctx)
	if r != nil {
		r.attempts.Add(1)
	}
	resp, err := a.traced.RoundTrip(req)
	a.in.attempt(ctx, r, req, resp, err)
	return resp, err
}

// Unwrap returns the base the attempts go to, under otelhttp: retryhttp
// looks through it for a Transport as base.
func (a *attempts) Unwrap() http.RoundTripper { return a.base }

// CloseIdleConnections closes the base's idle connections: otelhttp's
// transport does not pass the call on.
func (a *attempts) CloseIdleConnections() {
	if c, ok := a.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// resendCount, beneath otelhttp, sets http.request.resend_count on the
// span otelhttp made for a retry.
type resendCount struct{ base http.RoundTripper }

func (rc resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if n := retryhttp.AttemptNumber(ctx) - 1; n > 0 {
		span := trace.SpanFromContext(ctx)
		// Not the request's own span: otelhttp made none (a filter).
		if r := requestOf(ctx); span.IsRecording() && (r == nil || span.SpanContext().SpanID() != r.span.SpanContext().SpanID()) {
			span.SetAttributes(semconv.HTTPRequestResendCount(n))
		}
	}
	return rc.base.RoundTrip(req)
}

// request is what a logical request carries in its context for the hooks
// and the attempts: its span and its route. It is that context: the one
// the span was started in, which it extends with itself under requestKey,
// so that a request costs one allocation for both. It holds the attributes
// set at the end and the response body's wrapper for the same reason.
type request struct {
	context.Context                       // the one the span was started in
	span            trace.Span            // the request's span
	route           *route                // its labels and options
	attempts        atomic.Int32          // attempts sent
	gaveUp          bool                  // OnGiveUp ran; on the request's goroutine
	ended           [3]attribute.KeyValue // set by finish, at once
	body            spanBody              // the response's body, once there is one
}

type requestKey struct{}

// Value returns the request itself for requestKey, else the value of its
// context.
func (r *request) Value(key any) any {
	if _, ok := key.(requestKey); ok {
		return r
	}
	return r.Context.Value(key)
}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// start begins req's span and returns the request's state and a copy of
// req whose context carries both.
func (in *instruments) start(req *http.Request) (*request, *http.Request) {
	rt := in.routeOf(req)
	ctx, span := in.tracer.Start(req.Context(), rt.spanName, rt.spanStart...)
	r := &request{Context: ctx, span: span, route: rt}
	return r, req.WithContext(r)
}

var internalSpan = trace.WithSpanKind(trace.SpanKindInternal)

// finish records the outcome of the request on its span, and ends the span
// at once or, if there is a response, when its body is done.
func (r *request) finish(resp *http.Response, err error) (*http.Response, error) {
	span := r.span
	if !span.IsRecording() {
		span.End()
		return resp, err
	}
	// One call with the attributes in r: a call's own variadic slice
	// would escape to the heap.
	r.ended[0] = attribute.Int(keyAttempts, int(r.attempts.Load()))
	if err != nil {
		r.ended[1] = semconv.ErrorTypeKey.String(errorType(err))
		span.SetAttributes(r.ended[:2]...)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	r.ended[1] = semconv.HTTPResponseStatusCode(resp.StatusCode)
	n := 2
	if r.gaveUp {
		r.ended[2] = semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode))
		n = 3
	}
	span.SetAttributes(r.ended[:n]...)
	resp.Body = r.endWith(resp.Body)
	return resp, nil
}

// retry records a retry about to wait.
func (in *instruments) retry(e *retryhttp.RetryEvent) {
	ctx := e.Request.Context()
	r := requestOf(ctx)
	l := in.labelsOf(r, e.Request)
	in.delay.Record(ctx, e.Delay.Seconds(), in.attrs(l, attribute.String(keyDelaySource, e.Source.String())))
	if e.BudgetWait > 0 {
		in.budgetWaits.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
	}
	if r == nil || !r.span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.HTTPRequestResendCount(e.Attempt), // of the retry to come
		attribute.Float64(keyDelay, e.Delay.Seconds()),
		attribute.String(keyDelaySource, e.Source.String()))
	if e.BudgetWait > 0 {
		attrs = append(attrs, attribute.Float64(keyBudgetWait, e.BudgetWait.Seconds()))
	}
	attrs = appendOutcome(attrs, e.Response, e.Err)
	// The wait began when the attempt failed, before the budget's line.
	r.span.AddEvent(eventRetry, trace.WithTimestamp(time.Now().Add(-e.BudgetWait)), trace.WithAttributes(attrs...))
}

// giveUp records a request given up on.
func (in *instruments) giveUp(e *retryhttp.GiveUpEvent) {
	ctx := e.Request.Context()
	r := requestOf(ctx)
	l := in.labelsOf(r, e.Request)
	in.giveUps.Add(ctx, 1, in.attrs(l, attribute.String(keyReason, e.Reason.String())))
	switch e.Reason {
	case retryhttp.ReasonBudget:
		in.budgetDenials.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
	case retryhttp.ReasonThrottled:
		in.throttled.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
	}
	if r == nil {
		return
	}
	r.gaveUp = true
	if !r.span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attribute.String(keyReason, e.Reason.String()), attribute.Int(keyAttempts, e.Attempts))
	if e.BudgetWait > 0 {
		attrs = append(attrs, attribute.Float64(keyBudgetWait, e.BudgetWait.Seconds()))
	}
	attrs = appendOutcome(attrs, e.Response, e.Err)
	r.span.AddEvent(eventGiveUp, trace.WithAttributes(attrs...))
	r.span.SetStatus(codes.Error, "retryhttp: gave up ("+e.Reason.String()+")")
}

// appendOutcome appends the status code of resp, or the type of err.
func appendOutcome(attrs []attribute.KeyValue, resp *http.Response, err error) []attribute.KeyValue {
	if resp != nil {
		return append(attrs, semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if err != nil {
		return append(attrs, semconv.ErrorTypeKey.String(errorType(err)))
	}
	return attrs
}

// errorType is retryhttp.ErrorType, with "_OTHER" for an error it does not
// name (the semantic conventions' fallback) rather than nothing.
func errorType(err error) string {
	if t := retryhttp.ErrorType(err); t != "" {
		return t
	}
	return "_OTHER"
}

// The names of the spans' events, and of attributes of retryhttp's own;
// the attributes match those of the Transport's log records, durations
// being in seconds.
const (
	eventRetry  = "retryhttp.retry"
	eventGiveUp = "retryhttp.give_up"

	keyAttempts    = "retryhttp.attempts"     // attempts sent
	keyDelay       = "retryhttp.delay"        // s
	keyDelaySource = "retryhttp.delay_source" // retryhttp.DelaySource's text
	keyBudgetWait  = "retryhttp.budget_wait"  // s
	keyReason      = "retryhttp.reason"       // retryhttp.Reason's text
	keyStatusClass = "retryhttp.status_class" // "2xx" .. "5xx"
)

// endWith returns body that ends r's span when it is closed or read to
// its end, after the attempt's own span. An upgraded connection's body (101
// Switching Protocols) stays writable.
func (r *request) endWith(body io.ReadCloser) io.ReadCloser {
	r.body = spanBody{rc: body, span: r.span}
	if w, ok := body.(io.Writer); ok {
		return &spanRWBody{spanBody: &r.body, w: w}
	}
	return &r.body
}

type spanBody struct {
	rc    io.ReadCloser
	span  trace.Span
	ended atomic.Bool
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.rc.Close()
	b.end()
	return err
}

// end ends the span, the first time only.
func (b *spanBody) end() {
	if b.ended.CompareAndSwap(false, true) {
		b.span.End()
	}
}

type spanRWBody struct {
	*spanBody
	w io.Writer
}

func (b *spanRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
