package otelretry

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// fastPolicy retries after 1 ms, so the loopback tests wait next to nothing,
// and every wait is known exactly.
var fastPolicy = retryhttp.Policy{Backoff: retryhttp.Constant(time.Millisecond)}

// newClient returns a client whose Transport, of policy p, is instrumented
// into tel and propagates trace context in W3C headers.
func newClient(t *testing.T, tel *telemetry, tr *retryhttp.Transport, opts ...Option) *http.Client {
	t.Helper()
	opts = append(tel.options(WithHTTPOptions(otelhttp.WithPropagators(propagation.TraceContext{}))), opts...)
	c := &http.Client{Transport: NewTransport(tr, opts...)}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func get(t *testing.T, ctx context.Context, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	return c.Do(req)
}

// A request that needs three attempts is one trace: with no caller's span,
// the first attempt's span is its root; the request's span, made at the
// first retry, is that span's child and starts when it did; the later
// attempts' spans are the request span's children. Each attempt's span is
// the one whose context the server received, the retries' have their
// resend count, and the request's span has an event for each wait.
func TestTraceOfThreeAttempts(t *testing.T) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200).WithBody("ok")))
	t.Cleanup(srv.Close)
	tel := newTelemetry()
	// The budget holds a retry after a failure until news of the host (a
	// probe, here): the trace of the waits is what this test reads, so the
	// budget is off.
	c := newClient(t, tel, &retryhttp.Transport{Policy: fastPolicy, Budget: retryhttp.UnlimitedBudget()})

	resp, err := get(t, context.Background(), c, srv.URL+"/flaky")
	require.NoError(t, err)
	require.Equal(t, 3, retryhttp.Attempts(resp))
	// The failed attempts are over; the request and its last attempt last
	// as long as the body is the caller's.
	_, open := requestSpans(tel.ended())
	require.Len(t, open, 2, "spans ended before the body was closed")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "ok", string(body))

	_, requests, attempts := oneRequest(t, tel, 3, "the trace of a request that needed three attempts, as the exporter recorded it:\n")
	root := requests[0]
	require.Equal(t, "retryhttp GET", root.Name)
	require.Equal(t, trace.SpanKindInternal, root.SpanKind)
	require.False(t, attempts[0].Parent.IsValid(), "the caller had no span: the first attempt's is the root")
	require.Equal(t, attempts[0].SpanContext.SpanID(), root.Parent.SpanID(), "the request's span is the first attempt's child")
	require.Empty(t, root.Links, "its parent needs no link")
	require.Equal(t, attempts[0].StartTime, root.StartTime, "the request's span starts with its first attempt")
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	requireAttr(t, root.Attributes, "http.request.method", "GET")
	requireAttr(t, root.Attributes, "server.address", "127.0.0.1")
	requireAttr(t, root.Attributes, "server.port", int64(port))
	requireAttr(t, root.Attributes, "retryhttp.attempts", int64(3))
	requireAttr(t, root.Attributes, "http.response.status_code", int64(200))
	require.Equal(t, codes.Unset, root.Status.Code)
	for _, a := range attempts {
		require.False(t, a.EndTime.After(root.EndTime), "an attempt ended after its request")
	}

	seen := srv.Requests()
	require.Len(t, seen, 3)
	codesSent := []int64{503, 503, 200}
	for i, a := range attempts {
		require.Equal(t, root.SpanContext.TraceID(), a.SpanContext.TraceID(), "attempt %d", i+1)
		if i > 0 {
			require.Equal(t, root.SpanContext.SpanID(), a.Parent.SpanID(), "attempt %d is a child of the request", i+1)
		}
		require.Equal(t, "HTTP GET", a.Name)
		require.Equal(t, trace.SpanKindClient, a.SpanKind)
		requireAttr(t, a.Attributes, "http.response.status_code", codesSent[i])
		n, ok := attr(a.Attributes, "http.request.resend_count")
		if i == 0 {
			require.False(t, ok, "the first attempt is no resend")
		} else {
			require.True(t, ok, "attempt %d has no resend count", i+1)
			require.Equal(t, int64(i), n.AsInt64(), "attempt %d", i+1)
		}
		// The server got the attempt's own span as the parent.
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.HeaderCarrier(seen[i].Header)))
		require.Equal(t, a.SpanContext.SpanID(), sc.SpanID(), "the traceparent attempt %d sent", i+1)
	}

	require.Len(t, root.Events, 2)
	for i, e := range root.Events {
		require.Equal(t, "retryhttp.retry", e.Name)
		requireAttr(t, e.Attributes, "http.request.resend_count", int64(i+1))
		requireAttr(t, e.Attributes, "retryhttp.delay", time.Millisecond.Seconds())
		requireAttr(t, e.Attributes, "retryhttp.delay_source", "backoff")
		requireAttr(t, e.Attributes, "http.response.status_code", int64(503))
		_, ok := attr(e.Attributes, "retryhttp.budget_wait")
		require.False(t, ok, "the budget paid for the retry: no wait for it")
		// The wait began once the failed attempt's answer was in, and
		// ended before the next attempt.
		require.False(t, e.Time.Before(attempts[i].StartTime))
		require.False(t, e.Time.After(attempts[i+1].StartTime))
	}
}

// When the caller has a span, the first attempt's span and the request's
// are its children, the request's linked to the first attempt's and
// starting when it did; the later attempts are the request's children, all
// in the caller's trace.
func TestCallerSpanParentsTheRequest(t *testing.T) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(502), retryhttptest.Status(204)))
	t.Cleanup(srv.Close)
	tel := newTelemetry()
	c := newClient(t, tel, &retryhttp.Transport{Policy: fastPolicy})

	ctx, caller := tel.tp.Tracer("test").Start(context.Background(), "caller")
	resp, err := get(t, ctx, c, srv.URL)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	caller.End()

	spans, requests, attempts := oneRequest(t, tel, 2)
	root := requests[0]
	requireBesideFirst(t, caller, root, attempts[0])
	require.Equal(t, root.SpanContext.SpanID(), attempts[1].Parent.SpanID(), "the retry is the request's child")
	for _, a := range attempts {
		require.Equal(t, caller.SpanContext().TraceID(), a.SpanContext.TraceID())
	}
	var callerStub tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "caller" {
			callerStub = s
		}
	}
	require.Empty(t, callerStub.Events, "the caller's span gets no event of the request's")
}

// A request that the Transport neither retries nor gives up on has no span
// of otelretry's: its trace is otelhttp's alone, the attempt's span a child
// of the caller's, and the response's body is otelhttp's. So is a response
// the policy does not retry (a 404), which its attempt's span records.
func TestNoRequestSpanWithoutARetry(t *testing.T) {
	for _, code := range []int{200, 404} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			tel := newTelemetry()
			base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
				return testutil.Response(req, code, nil, ""), nil
			}}
			c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: base}, tel.options()...)}
			plain := &http.Client{Transport: otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tel.tp))}
			ctx, caller := tel.tp.Tracer("test").Start(context.Background(), "caller")
			defer caller.End()

			resp, err := get(t, ctx, c, "http://svc.test/items")
			require.NoError(t, err)
			want, err := get(t, ctx, plain, "http://svc.test/items")
			require.NoError(t, err)
			require.Equal(t, code, resp.StatusCode)
			require.IsType(t, want.Body, resp.Body, "the body is otelhttp's, not wrapped again")
			require.NoError(t, resp.Body.Close())
			require.NoError(t, want.Body.Close())

			requests, attempts := requestSpans(tel.ended())
			require.Empty(t, requests)
			require.Len(t, attempts, 2)
			require.Equal(t, caller.SpanContext().SpanID(), attempts[0].Parent.SpanID())
			_, ok := attr(attempts[0].Attributes, "http.request.resend_count")
			require.False(t, ok)
			require.Equal(t, tel.metrics(t).count(t, MetricAttempts), int64(1))
		})
	}
}

// The request's state rides in its context, which is the context the span
// was started in: the base still sees the caller's values and deadline, and
// the caller's cancellation ends the attempt.
func TestCallerContextReachesTheBase(t *testing.T) {
	type key struct{}
	tel := newTelemetry()
	started := make(chan struct{})
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		ctx := req.Context()
		if ctx.Value(key{}) != "caller's" {
			return nil, errors.New("the caller's value is lost")
		}
		if _, ok := ctx.Deadline(); !ok {
			return nil, errors.New("the caller's deadline is lost")
		}
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: base}, tel.options()...)}
	ctx, cancel := context.WithTimeout(context.WithValue(t.Context(), key{}, "caller's"), time.Minute)
	go func() {
		<-started
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
	require.NoError(t, err)
	_, err = c.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	requests, _ := requestSpans(tel.ended())
	require.Len(t, requests, 1)
	requireAttr(t, requests[0].Attributes, "error.type", "canceled")
	requireAttr(t, requests[0].Attributes, "retryhttp.attempts", int64(1))
}

// A request given up on with a response: the request's span gets a give-up
// event naming the reason, and is an error; the hooks set before
// NewTransport still run, with the span in the request's context.
func TestGiveUpIsAnError(t *testing.T) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503)))
	t.Cleanup(srv.Close)
	tel := newTelemetry()
	var given []*retryhttp.GiveUpEvent
	var spanOfHook trace.SpanContext
	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{MaxAttempts: 2, Backoff: fastPolicy.Backoff},
		OnGiveUp: func(e *retryhttp.GiveUpEvent) {
			given = append(given, e)
			spanOfHook = trace.SpanContextFromContext(e.Request.Context())
		},
	}
	c := newClient(t, tel, tr)

	resp, err := get(t, context.Background(), c, srv.URL)
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	require.NoError(t, resp.Body.Close())

	_, requests, _ := oneRequest(t, tel, 2)
	root := requests[0]
	require.Len(t, given, 1, "the caller's OnGiveUp ran")
	require.Equal(t, root.SpanContext.SpanID(), spanOfHook.SpanID())
	require.Equal(t, codes.Error, root.Status.Code)
	require.Contains(t, root.Status.Description, given[0].Reason.String())
	requireAttr(t, root.Attributes, "error.type", "503")
	requireAttr(t, root.Attributes, "http.response.status_code", int64(503))
	requireAttr(t, root.Attributes, "retryhttp.attempts", int64(2))
	require.Len(t, root.Events, 2)
	require.Equal(t, "retryhttp.retry", root.Events[0].Name)
	e := root.Events[1]
	require.Equal(t, "retryhttp.give_up", e.Name)
	requireAttr(t, e.Attributes, "retryhttp.reason", retryhttp.ReasonExhausted.String())
	requireAttr(t, e.Attributes, "retryhttp.attempts", int64(given[0].Attempts))
	requireAttr(t, e.Attributes, "http.response.status_code", int64(503))
}

// A request that ends with an error ends its span at once, as an error
// whose error.type is retryhttp's name for it; so do its attempts'.
func TestErrorEndsTheSpan(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: connections are refused
	tel := newTelemetry()
	c := newClient(t, tel, &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 3, Backoff: fastPolicy.Backoff}})

	_, err = get(t, context.Background(), c, "http://"+addr+"/")
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	var gaveUp *retryhttp.Error
	require.True(t, errors.As(err, &gaveUp))

	_, requests, attempts := oneRequest(t, tel, gaveUp.Attempts)
	root := requests[0]
	require.Equal(t, codes.Error, root.Status.Code)
	requireAttr(t, root.Attributes, "error.type", "connection_refused")
	requireAttr(t, root.Attributes, "retryhttp.attempts", int64(gaveUp.Attempts))
	last := root.Events[len(root.Events)-1]
	require.Equal(t, "retryhttp.give_up", last.Name)
	requireAttr(t, last.Attributes, "retryhttp.reason", gaveUp.Reason.String())
	requireAttr(t, last.Attributes, "error.type", "connection_refused")
	for _, e := range root.Events[:len(root.Events)-1] {
		requireAttr(t, e.Attributes, "error.type", "connection_refused")
	}
	require.Equal(t, attempts[0].SpanContext.SpanID(), root.Parent.SpanID())
	for i, a := range attempts {
		require.Equal(t, codes.Error, a.Status.Code)
		if i > 0 {
			require.Equal(t, root.SpanContext.SpanID(), a.Parent.SpanID())
		}
	}
}

// A method outside the known ones is "_OTHER" with its name kept aside,
// and the span is named "retryhttp HTTP"; WithKnownMethods makes it known.
// (The request is given up on, so that it has a span.)
func TestUnknownMethod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []Option
		span     string
		method   string
		original string
	}{
		{name: "default", span: "retryhttp HTTP", method: "_OTHER", original: "PROPFIND"},
		{name: "known", opts: []Option{WithKnownMethods("GET", "PROPFIND")}, span: "retryhttp PROPFIND", method: "PROPFIND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := newTelemetry()
			c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: unavailable(), Policy: once},
				tel.options(tc.opts...)...)}
			req, err := http.NewRequest("PROPFIND", "http://dav.test/files/", nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())

			requests, _ := requestSpans(tel.ended())
			require.Len(t, requests, 1)
			require.Equal(t, tc.span, requests[0].Name)
			requireAttr(t, requests[0].Attributes, "http.request.method", tc.method)
			original, ok := attr(requests[0].Attributes, "http.request.method_original")
			require.Equal(t, tc.original != "", ok)
			require.Equal(t, tc.original, original.AsString())
			m := tel.metrics(t)
			require.Equal(t, map[string]int64{tc.method: 1}, m.values(t, MetricAttempts, "http.request.method"))
		})
	}
}

// otelhttp's transport does not pass CloseIdleConnections on; the
// instrumented Transport still reaches its base.
func TestCloseIdleConnectionsReachesTheBase(t *testing.T) {
	base := &testutil.IdleRecorder{RoundTripper: &testutil.Base{}}
	c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: base}, newTelemetry().options()...)}
	c.CloseIdleConnections()
	require.Equal(t, 1, base.Closes())
}

// The body of a 101 Switching Protocols response stays writable, and the
// request's span ends when it is closed. (The 101 answers a retry, so that
// the request has a span.)
func TestUpgradedBodyStaysWritable(t *testing.T) {
	conn := &rwBody{}
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n == 1 {
			return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
		}
		resp := testutil.Response(req, http.StatusSwitchingProtocols, nil, "")
		resp.Body = conn
		return resp, nil
	}}
	tel := newTelemetry()
	tr := &retryhttp.Transport{Base: base, Policy: fastPolicy, Budget: retryhttp.UnlimitedBudget()}
	c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
	req, err := http.NewRequest(http.MethodGet, "http://ws.test/chat", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := c.Do(req)
	require.NoError(t, err)
	w, ok := resp.Body.(io.Writer)
	require.True(t, ok, "the body of a 101 is a %T, not writable", resp.Body)
	_, err = w.Write([]byte("hello"))
	require.NoError(t, err)
	require.Equal(t, "hello", conn.written.String())
	requests, _ := requestSpans(tel.ended())
	require.Empty(t, requests, "the span ended while the connection is open")
	require.NoError(t, resp.Body.Close())
	requests, _ = requestSpans(tel.ended())
	require.Len(t, requests, 1)
	require.True(t, conn.closed)
}

// rwBody is the body of an upgraded connection: readable and writable.
type rwBody struct {
	written strings.Builder
	closed  bool
}

func (b *rwBody) Read([]byte) (int, error)    { return 0, io.EOF }
func (b *rwBody) Write(p []byte) (int, error) { return b.written.Write(p) }
func (b *rwBody) Close() error                { b.closed = true; return nil }

// With OpenTelemetry's no-op providers (a program that sets none), the
// Transport works as without otelretry: the response, its body and its
// attempt count are untouched, and the caller's hooks run.
func TestNoopProviders(t *testing.T) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(200).WithBody("ok")))
	t.Cleanup(srv.Close)
	var retries int
	tr := &retryhttp.Transport{Policy: fastPolicy, OnRetry: func(*retryhttp.RetryEvent) { retries++ }}
	c := &http.Client{Transport: NewTransport(tr,
		WithTracerProvider(tracenoop.NewTracerProvider()), WithMeterProvider(metricnoop.NewMeterProvider()))}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := get(t, context.Background(), c, srv.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, "ok", string(body))
	require.Equal(t, 2, retryhttp.Attempts(resp))
	require.Equal(t, 1, retries)
}

// A request given up on at its first attempt (one attempt allowed) gets its
// span at the give-up: the caller's child, linked to the attempt's span, an
// error with the give-up event, ending with the response's body.
func TestGiveUpAtTheFirstAttempt(t *testing.T) {
	tel := newTelemetry()
	c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: unavailable(), Policy: once}, tel.options()...)}
	ctx, caller := tel.tp.Tracer("test").Start(context.Background(), "caller")
	defer caller.End()
	resp, err := get(t, ctx, c, "http://svc.test/")
	require.NoError(t, err)
	require.Equal(t, 503, resp.StatusCode)
	requests, _ := requestSpans(tel.ended())
	require.Empty(t, requests, "the request's span lasts as long as the body")
	require.NoError(t, resp.Body.Close())

	_, requests, attempts := oneRequest(t, tel, 1)
	s := requests[0]
	requireBesideFirst(t, caller, s, attempts[0])
	require.Equal(t, codes.Error, s.Status.Code)
	require.Len(t, s.Events, 1)
	require.Equal(t, "retryhttp.give_up", s.Events[0].Name)
	requireAttr(t, s.Events[0].Attributes, "retryhttp.reason", retryhttp.ReasonNoRetries.String())
	requireAttr(t, s.Attributes, "retryhttp.attempts", int64(1))
	requireAttr(t, s.Attributes, "error.type", "503")
}

// A hedge makes the request's span as a retry does: the first attempt,
// sent before it, is the caller's child; the hedge, the request's. The
// first attempt's span and the request's are made on different goroutines
// (run with -race).
func TestHedgeMakesTheRequestSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 { // slow: it answers only when the hedge has won
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return testutil.Response(req, 200, nil, ""), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{After: 10 * time.Millisecond, Fraction: 1}}}
		c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
		ctx, caller := tel.tp.Tracer("test").Start(t.Context(), "caller")
		resp, err := get(t, ctx, c, "http://svc.test/")
		require.NoError(t, err)
		require.Equal(t, 2, retryhttp.Attempts(resp), "the hedge won")
		require.NoError(t, resp.Body.Close())
		synctest.Wait() // the first attempt's end
		caller.End()

		_, requests, attempts := oneRequest(t, tel, 2)
		s := requests[0]
		requireBesideFirst(t, caller, s, attempts[0])
		require.Equal(t, s.SpanContext.SpanID(), attempts[1].Parent.SpanID())
		requireAttr(t, attempts[1].Attributes, "http.request.resend_count", int64(1))
		require.Len(t, s.Events, 1)
		require.Equal(t, "retryhttp.hedge", s.Events[0].Name)
		requireAttr(t, s.Events[0].Attributes, "retryhttp.delay_source", "hedge")
		require.Equal(t, attempts[0].StartTime.Add(10*time.Millisecond), attempts[1].StartTime)
	})
}

// When otelhttp's filter skips the attempts, they have no spans: the
// request's span still tells the retries, it gets no resend count of an
// attempt's, and links no span.
func TestFilteredAttempts(t *testing.T) {
	tel := newTelemetry()
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n%2 == 1 { // each request's first attempt
			return testutil.Response(req, 503, nil, ""), nil
		}
		return testutil.Response(req, 200, nil, ""), nil
	}}
	tr := &retryhttp.Transport{Base: base, Policy: fastPolicy, Budget: retryhttp.UnlimitedBudget()}
	skip := WithHTTPOptions(otelhttp.WithFilter(func(*http.Request) bool { return false }))
	c := &http.Client{Transport: NewTransport(tr, tel.options(skip)...)}
	for _, withCaller := range []bool{false, true} {
		ctx := context.Background()
		var caller trace.Span
		if withCaller {
			ctx, caller = tel.tp.Tracer("test").Start(ctx, "caller")
		}
		resp, err := get(t, ctx, c, "http://svc.test/")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		if caller != nil {
			caller.End()
		}
	}
	spans := tel.ended()
	t.Logf("\n%s", render(spans))
	requests, attempts := requestSpans(spans)
	require.Empty(t, attempts)
	require.Len(t, requests, 2)
	for i, s := range requests {
		require.Empty(t, s.Links, "request %d", i)
		require.Equal(t, i == 1, s.Parent.IsValid(), "request %d: the caller's child, or a root", i)
		_, ok := attr(s.Attributes, "http.request.resend_count")
		require.False(t, ok, "request %d", i)
		require.Len(t, s.Events, 1)
	}
	for _, s := range spans {
		_, ok := attr(s.Attributes, "http.request.resend_count")
		require.False(t, ok, "%s", s.Name)
	}
}
