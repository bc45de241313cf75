package otelretry

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// The request's span and the hedges that race its first attempt: the span
// is made at most once, never after the request is over, and never before
// the first attempt's span is known.

// liveSpans keeps the names of the spans started and not yet ended.
type liveSpans struct {
	mu   sync.Mutex
	live map[trace.SpanID]string
}

func (l *liveSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live == nil {
		l.live = map[trace.SpanID]string{}
	}
	l.live[s.SpanContext().SpanID()] = s.Name()
}
func (l *liveSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, s.SpanContext().SpanID())
}
func (l *liveSpans) Shutdown(context.Context) error   { return nil }
func (l *liveSpans) ForceFlush(context.Context) error { return nil }
func (l *liveSpans) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Values(l.live))
}

// holdMP is a MeterProvider whose retryhttp.hedges counter calls hold
// before it counts, in otelretry's OnRetry hook: a hedge's goroutine held
// up between the hedge's launch and the hook.
type holdMP struct {
	metric.MeterProvider
	hold func()
}

func (p holdMP) Meter(n string, o ...metric.MeterOption) metric.Meter {
	return holdMeter{p.MeterProvider.Meter(n, o...), p.hold}
}

type holdMeter struct {
	metric.Meter
	hold func()
}

func (m holdMeter) Int64Counter(n string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, err := m.Meter.Int64Counter(n, o...)
	if n != MetricHedges {
		return c, err
	}
	return holdCounter{c, m.hold}, err
}

type holdCounter struct {
	metric.Int64Counter
	hold func()
}

func (c holdCounter) Add(ctx context.Context, v int64, o ...metric.AddOption) {
	c.hold()
	c.Int64Counter.Add(ctx, v, o...)
}

// A hedge that goes just as the first attempt answers runs its hook while
// the first attempt's answer comes back. RoundTrip waits for the hook (it
// reads the caller's request), and the hedge, made but lost, leaves no span
// open. holdMP holds the hook until the first attempt has answered; before
// hedges' hooks were waited for, this hook ran after RoundTrip returned.
func TestHedgeAsTheAnswerComesMakesNoSpanOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		live := &liveSpans{}
		tel.tp.RegisterSpanProcessor(live)
		inHook := make(chan struct{})
		answered := make(chan struct{})
		hookDone := make(chan struct{})
		var once sync.Once
		mp := holdMP{tel.mp, func() {
			once.Do(func() {
				close(inHook)
				<-answered
				time.Sleep(time.Millisecond) // the hook takes its time
				close(hookDone)
			})
		}}
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				<-inHook // the hedge is launched: the first attempt answers now
				defer close(answered)
			}
			return testutil.Response(req, 200, nil, ""), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{After: 10 * time.Millisecond, Fraction: 1}}}
		c := &http.Client{Transport: NewTransport(tr, WithTracerProvider(tel.tp), WithMeterProvider(mp))}
		ctx, caller := tel.tp.Tracer("test").Start(t.Context(), "caller")
		resp, err := get(t, ctx, c, "http://svc.test/")
		require.NoError(t, err)
		select {
		case <-hookDone:
		default:
			t.Fatal("RoundTrip returned before the hedge's hook was done")
		}
		require.Equal(t, 1, retryhttp.Attempts(resp), "the first attempt won")
		require.NoError(t, resp.Body.Close())
		synctest.Wait() // the hedge goroutine is done
		caller.End()
		t.Logf("\n%s", render(tel.ended()))
		require.Empty(t, live.names(), "spans started and never ended")
	})
}

// The same without help: the first attempt answers when the hedge is due,
// both at the same fake instant, their goroutines racing for real. Without
// the check, a few percent of the requests left a span that never ended.
func TestHedgeAsTheAnswerComesLeavesNoSpanOpen(t *testing.T) {
	for i := 0; i < 1000; i++ {
		var leaked []string
		synctest.Test(t, func(t *testing.T) {
			tel := newTelemetry()
			live := &liveSpans{}
			tel.tp.RegisterSpanProcessor(live)
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				if n == 1 {
					time.Sleep(10 * time.Millisecond)
				}
				return testutil.Response(req, 200, nil, ""), nil
			}}
			tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
				Hedge: &retryhttp.Hedge{After: 10 * time.Millisecond, Fraction: 1}}}
			c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
			resp, err := get(t, context.Background(), c, "http://svc.test/")
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			synctest.Wait()
			leaked = live.names()
		})
		require.Empty(t, leaked, "request %d: spans started and never ended", i)
	}
}

// slowFirst is a propagator whose Inject, for a request's first attempt,
// takes d (in fake time): the first attempt's goroutine held up between
// otelhttp's start of its span and the base.
type slowFirst struct {
	propagation.TraceContext
	d time.Duration
}

func (p slowFirst) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if retryhttp.AttemptNumber(ctx) == 1 {
		time.Sleep(p.d)
	}
	p.TraceContext.Inject(ctx, c)
}

// A hedge due after otelhttp started the first attempt's span but before
// the attempt reached the base, where otelretry keeps that span, waits for
// it: the request's span is then the first attempt's child, with no
// caller's span, and the attempts stay in one trace.
func TestHedgeBeforeTheFirstSpanIsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return testutil.Response(req, 200, nil, ""), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{After: time.Millisecond, Fraction: 1}}}
		c := &http.Client{Transport: NewTransport(tr, tel.options(
			WithHTTPOptions(otelhttp.WithPropagators(slowFirst{d: 5 * time.Millisecond})))...)}
		start := time.Now()
		resp, err := get(t, t.Context(), c, "http://svc.test/")
		require.NoError(t, err)
		require.Equal(t, 2, retryhttp.Attempts(resp), "the hedge won")
		require.NoError(t, resp.Body.Close())
		synctest.Wait()
		_, requests, attempts := oneRequest(t, tel, 2)
		require.Equal(t, attempts[0].SpanContext.SpanID(), requests[0].Parent.SpanID())
		require.Equal(t, requests[0].SpanContext.SpanID(), attempts[1].Parent.SpanID())
		for _, s := range attempts {
			require.Equal(t, requests[0].SpanContext.TraceID(), s.SpanContext.TraceID(), "%s: one request, one trace", s.Name)
		}
		require.Equal(t, start.Add(5*time.Millisecond), attempts[1].StartTime,
			"the hedge, due at 1 ms, went once the first attempt's span was known")
	})
}

// A first attempt that panics inside otelhttp (here in the caller's span
// name formatter), before otelretry knows its span, still lets a hedge
// waiting for that span go on: the panic ends the first attempt, and the
// wait with it. The caller recovers the panic, as net/http's server does a
// handler's.
func TestHedgeDoesNotWaitForAFirstAttemptThatPanicked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		inHook := make(chan struct{})
		var once sync.Once
		mp := holdMP{tel.mp, func() { once.Do(func() { close(inHook) }) }}
		hookDone := make(chan struct{})
		tr := &retryhttp.Transport{Base: &testutil.Base{}, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{After: time.Millisecond, Fraction: 1}},
			OnRetry: func(*retryhttp.RetryEvent) { close(hookDone) }}
		name := otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if retryhttp.AttemptNumber(r.Context()) == 1 {
				<-inHook                          // the hedge's hook is about to ask for the span
				time.Sleep(20 * time.Millisecond) // and waits for the first attempt's
				panic("formatter")
			}
			return "HTTP GET"
		})
		c := &http.Client{Transport: NewTransport(tr, WithTracerProvider(tel.tp), WithMeterProvider(mp),
			WithHTTPOptions(name))}
		func() {
			defer func() { require.Equal(t, "formatter", recover()) }()
			_, _ = get(t, context.Background(), c, "http://svc.test/")
		}()
		synctest.Wait()
		select {
		case <-hookDone:
		default:
			t.Fatal("the hedge's hook still waits for the first attempt's span")
		}
	})
}

// A hook of the caller's that panics after the request's span was made
// (OnRetry, here, which runs after otelretry's own) leaves no span open:
// the span ends at once, as an Error.
func TestAPanickingHookEndsTheRequestSpan(t *testing.T) {
	tel := newTelemetry()
	live := &liveSpans{}
	tel.tp.RegisterSpanProcessor(live)
	tr := &retryhttp.Transport{Base: unavailable(), Policy: fastPolicy, Budget: retryhttp.UnlimitedBudget(),
		OnRetry: func(*retryhttp.RetryEvent) { panic("hook") }}
	c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
	func() {
		defer func() { require.Equal(t, "hook", recover()) }()
		_, _ = get(t, context.Background(), c, "http://svc.test/")
	}()
	require.Empty(t, live.names(), "spans started and never ended")
	requests, _ := requestSpans(tel.ended())
	require.Len(t, requests, 1)
	require.Equal(t, codes.Error, requests[0].Status.Code)
}
