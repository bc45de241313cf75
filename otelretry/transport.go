package otelretry

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/errortype"
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
// place: it makes otelhttp's span for each attempt, a span for each
// request that the Transport retries, hedges or gives up on, and the
// metrics (see the package doc).
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
	r := t.in.start(req)
	defer r.abandon()
	resp, err := t.next.RoundTrip(&r.req)
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
	n := retryhttp.AttemptNumber(ctx)
	r := requestOf(ctx)
	// A retry follows its OnRetry, which marks the request; a hedge has
	// none. A request that did not come through the instrumented
	// RoundTripper has no state to mark: its attempts after the first
	// count as retries.
	retry := n > 1 && (r == nil || r.retrying.Swap(false))
	if r != nil {
		r.attempts.Add(1)
		if n == 1 {
			// A hedge may wait for the first attempt's span: it is known
			// once the attempt reaches resendCount, or else (otelhttp
			// returned or panicked before) now.
			defer r.firstEnded()
		}
	}
	resp, err := a.traced.RoundTrip(req)
	a.in.attempt(r, req, retry, resp, err)
	return resp, err
}

// noSpan is a span that records nothing.
var noSpan = trace.SpanFromContext(context.Background())

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
// span otelhttp made for a retry, and keeps the first attempt's span for
// the request's own span, should the request get one.
type resendCount struct{ base http.RoundTripper }

func (rc resendCount) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if r := requestOf(ctx); r != nil {
		span := trace.SpanFromContext(ctx)
		if n := retryhttp.AttemptNumber(ctx) - 1; n == 0 {
			r.setFirst(span)
		} else if span.IsRecording() && !r.owns(span) { // otelhttp made one (no filter)
			span.SetAttributes(semconv.HTTPRequestResendCount(n))
		}
	}
	return rc.base.RoundTrip(req)
}

// request is what a logical request carries in its context for the hooks
// and the attempts. It is that context: the caller's, which it extends
// with itself under requestKey. It also holds the copy of the caller's
// request that carries it, so that a request costs one allocation for
// both. Once the request has a span of its own, the context passes the
// span on to the attempts after it: they become its children.
//
// The request's span is made only when the Transport retries the request
// or gives up on it (see the package doc): a request that succeeds at once
// has otelhttp's span alone, and pays otelretry for this state alone.
type request struct {
	context.Context                        // the caller's
	req             http.Request           // the caller's request, in this context
	route           *route                 // its labels and options
	traced          atomic.Pointer[traced] // the request's span, once made
	attempts        atomic.Int32           // attempts sent
	firstKnown      atomic.Bool            // first is set
	retrying        atomic.Bool            // OnRetry ran for a retry, not sent yet

	// (In this order, the request's state and copy take 384 bytes, a size
	// class of the allocator's.)
	mu        sync.Mutex
	gaveUp    bool          // OnGiveUp ran; on the request's goroutine
	finished  bool          // finish ran; on the request's goroutine
	over      bool          // finish or abandon ran: no span is made any more; requires mu
	first     trace.Span    // the first attempt's span (otelhttp's); requires mu
	firstWait chan struct{} // closed when first is set, if a hedge waits for it; requires mu
}

// traced is a request's span, the caller's context holding it, which the
// attempts after it are sent in, and what finish needs with it: the
// attributes it sets at the end (an array, as a call's own variadic slice
// would escape to the heap) and the response body's wrapper.
type traced struct {
	ctx   context.Context
	span  trace.Span
	ended [3]attribute.KeyValue
	body  spanBody
}

type requestKey struct{}

// Value returns the request itself for requestKey, else the value of its
// context, with the request's span once there is one.
func (r *request) Value(key any) any {
	if _, ok := key.(requestKey); ok {
		return r
	}
	if t := r.traced.Load(); t != nil {
		return t.ctx.Value(key)
	}
	return r.Context.Value(key)
}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// setFirst keeps the span of the request's first attempt, and lets a
// hedge waiting for it go on.
func (r *request) setFirst(span trace.Span) {
	r.mu.Lock()
	if r.first == nil {
		r.first = span
		r.firstKnown.Store(true)
		if r.firstWait != nil {
			close(r.firstWait)
		}
	}
	r.mu.Unlock()
}

// firstEnded lets a hedge waiting for the first attempt's span go on, once
// the first attempt has returned, whether or not its span was known.
func (r *request) firstEnded() {
	if !r.firstKnown.Load() {
		r.setFirst(noSpan)
	}
}

// abandon ends the request's span, if it has one, when RoundTrip panics
// (a hook of the caller's, say) before finish: an Error, ended at once.
func (r *request) abandon() {
	if r.finished {
		return
	}
	r.mu.Lock()
	r.over = true
	r.mu.Unlock()
	if t := r.traced.Load(); t != nil {
		t.span.SetStatus(codes.Error, "retryhttp: the request panicked")
		t.span.End()
	}
}

// owns reports whether span is the request's own.
func (r *request) owns(span trace.Span) bool {
	t := r.traced.Load()
	return t != nil && t.span.SpanContext().SpanID() == span.SpanContext().SpanID()
}

// spanOf returns the request's span, which it makes the first time, when
// the Transport first retries, hedges or gives up on the request. The span
// starts when the first attempt's did, as the request did (or now, without
// a first attempt's span or with a tracer that does not tell), and is a
// child of the caller's span, linked to the first attempt's. Without a
// caller's span it is the first attempt's child instead, so that the
// request's attempts stay in one trace. Once the request is over (a hedge
// that lost the race to the first attempt's answer runs its hook late), it
// makes no span: one made then would never end.
func (in *instruments) spanOf(r *request) trace.Span {
	if t := r.traced.Load(); t != nil {
		return t.span
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A hedge can go before the first attempt's span is known: it waits
	// until otelhttp has made it and handed the attempt on, a matter of
	// microseconds unless the first attempt's goroutine was held up.
	for r.first == nil && r.attempts.Load() > 0 && !r.over {
		if r.firstWait == nil {
			r.firstWait = make(chan struct{})
		}
		wait := r.firstWait
		r.mu.Unlock()
		<-wait
		r.mu.Lock()
	}
	if t := r.traced.Load(); t != nil {
		return t.span
	}
	if r.over {
		return noSpan
	}
	opts := make([]trace.SpanStartOption, 0, len(r.route.spanStart)+2)
	opts = append(opts, r.route.spanStart...)
	parent := r.Context
	caller := trace.SpanContextFromContext(parent)
	if first := r.first; first != nil && first.SpanContext().IsValid() && first.SpanContext().SpanID() != caller.SpanID() {
		// The SDK's spans tell their start (sdktrace.ReadOnlySpan).
		if s, ok := first.(interface{ StartTime() time.Time }); ok {
			opts = append(opts, trace.WithTimestamp(s.StartTime()))
		}
		if caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: first.SpanContext()}))
		} else {
			parent = trace.ContextWithSpan(parent, first)
		}
	}
	ctx, span := in.tracer.Start(parent, r.route.spanName, opts...)
	r.traced.Store(&traced{ctx: ctx, span: span})
	return span
}

// start returns the request's state, whose req is the copy of req to send.
func (in *instruments) start(req *http.Request) *request {
	r := &request{Context: req.Context(), route: in.routeOf(req)}
	r.req = *req.WithContext(r) // inlined: the copy is made on the stack
	return r
}

var internalSpan = trace.WithSpanKind(trace.SpanKindInternal)

// finish records the outcome of the request on its span, if it has one,
// and ends the span at once or, if there is a response, when its body is
// done.
func (r *request) finish(resp *http.Response, err error) (*http.Response, error) {
	r.finished = true
	r.mu.Lock()
	r.over = true
	r.mu.Unlock()
	t := r.traced.Load()
	if t == nil {
		return resp, err
	}
	span := t.span
	if !span.IsRecording() {
		span.End()
		return resp, err
	}
	t.ended[0] = attribute.Int(keyAttempts, int(r.attempts.Load()))
	if err != nil {
		t.ended[1] = semconv.ErrorTypeKey.String(errorType(err))
		span.SetAttributes(t.ended[:2]...)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	t.ended[1] = semconv.HTTPResponseStatusCode(resp.StatusCode)
	n := 2
	if r.gaveUp {
		t.ended[2] = semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode))
		n = 3
	}
	span.SetAttributes(t.ended[:n]...)
	resp.Body = t.endWith(resp.Body)
	return resp, nil
}

// retry records a retry about to wait, or a hedge about to be sent.
func (in *instruments) retry(e *retryhttp.RetryEvent) {
	ctx := e.Request.Context()
	r := requestOf(ctx)
	l := in.labelsOf(r, e.Request)
	event := eventRetry
	if e.Hedge {
		event = eventHedge
		in.hedges.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
	} else {
		in.delay.Record(ctx, e.Delay.Seconds(), in.attrs(l, attribute.String(keyDelaySource, e.Source)))
		if e.BudgetWait > 0 {
			in.budgetWaits.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
		}
		if r != nil {
			r.retrying.Store(true)
		}
	}
	if r == nil {
		return
	}
	span := in.spanOf(r)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.HTTPRequestResendCount(e.Attempt), // of the attempt to come
		attribute.Float64(keyDelay, e.Delay.Seconds()),
		attribute.String(keyDelaySource, e.Source))
	if e.BudgetWait > 0 {
		attrs = append(attrs, attribute.Float64(keyBudgetWait, e.BudgetWait.Seconds()))
	}
	attrs = appendOutcome(attrs, e.Response, e.Err)
	// The wait began when the attempt failed, before the budget's line.
	span.AddEvent(event, trace.WithTimestamp(time.Now().Add(-e.BudgetWait)), trace.WithAttributes(attrs...))
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
	span := in.spanOf(r)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attribute.String(keyReason, e.Reason.String()), attribute.Int(keyAttempts, e.Attempts))
	if e.BudgetWait > 0 {
		attrs = append(attrs, attribute.Float64(keyBudgetWait, e.BudgetWait.Seconds()))
	}
	attrs = appendOutcome(attrs, e.Response, e.Err)
	span.AddEvent(eventGiveUp, trace.WithAttributes(attrs...))
	span.SetStatus(codes.Error, "retryhttp: gave up ("+e.Reason.String()+")")
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

// errorType is the name the core's logs give err (errortype.Of), with "_OTHER" for an error it does not
// name (the semantic conventions' fallback) rather than nothing.
func errorType(err error) string {
	if t := errortype.Of(err); t != "" {
		return t
	}
	return "_OTHER"
}

// The names of the spans' events, and of attributes of retryhttp's own;
// the attributes match those of the Transport's log records, durations
// being in seconds.
const (
	eventRetry  = "retryhttp.retry"
	eventHedge  = "retryhttp.hedge"
	eventGiveUp = "retryhttp.give_up"

	keyAttempts    = "retryhttp.attempts"     // attempts sent
	keyDelay       = "retryhttp.delay"        // s
	keyDelaySource = "retryhttp.delay_source" // RetryEvent.Source
	keyBudgetWait  = "retryhttp.budget_wait"  // s
	keyReason      = "retryhttp.reason"       // retryhttp.Reason's text
	keyStatusClass = "retryhttp.status_class" // "2xx" .. "5xx"
)

// endWith returns body that ends t's span when it is closed or read to
// its end, after the attempt's own span. An upgraded connection's body (101
// Switching Protocols) stays writable.
func (t *traced) endWith(body io.ReadCloser) io.ReadCloser {
	t.body = spanBody{rc: body, span: t.span}
	if w, ok := body.(io.Writer); ok {
		return &spanRWBody{spanBody: &t.body, w: w}
	}
	return &t.body
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
