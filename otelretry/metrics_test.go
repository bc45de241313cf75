package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// The metrics count what the Transport's own Stats count, and what the
// server saw: attempts by outcome (status class or error type), retries,
// give-ups by reason, and each retry's delay.
func TestMetricsAgreeWithStats(t *testing.T) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503)))
	srv.Route("/flaky", retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(503), retryhttptest.Status(200)))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close())

	tel := newTelemetry()
	var mu sync.Mutex
	var delays []time.Duration
	tr := &retryhttp.Transport{Policy: fastPolicy, OnRetry: func(e *retryhttp.RetryEvent) {
		mu.Lock()
		delays = append(delays, e.Delay)
		mu.Unlock()
	}}
	c := newClient(t, tel, tr)
	do := func(ctx context.Context, method, u string) {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		require.NoError(t, err)
		if resp, err := c.Do(req); err == nil {
			require.NoError(t, resp.Body.Close())
		}
	}
	do(context.Background(), http.MethodGet, srv.URL+"/flaky")                                           // 503, 503, 200
	do(retryhttp.WithPolicy(context.Background(), retryhttp.Policy{MaxAttempts: 2}), "GET", srv.URL+"/") // 503, 503: attempts exhausted
	do(context.Background(), http.MethodPost, srv.URL+"/")                                               // 503: not idempotent
	do(context.Background(), http.MethodGet, refused)                                                    // refused 4 times

	stats := tr.Stats()
	m := tel.metrics(t)
	require.EqualValues(t, stats.Attempts, m.count(t, MetricAttempts))
	var answered, ok int64
	for _, r := range srv.Requests() {
		answered++
		if r.Route == "/flaky" && r.Step == 2 {
			ok++
		}
	}
	require.Equal(t, ok, m.count(t, MetricAttempts, attribute.String("retryhttp.status_class", "2xx")))
	require.Equal(t, answered-ok, m.count(t, MetricAttempts, attribute.String("retryhttp.status_class", "5xx")))
	require.Equal(t, int64(stats.Attempts)-answered, m.count(t, MetricAttempts, attribute.String("error.type", "connection_refused")))
	require.EqualValues(t, stats.Retries, m.count(t, MetricRetries))
	require.Equal(t, map[string]int64{"GET": int64(stats.Retries)}, m.values(t, MetricRetries, "http.request.method"))

	want := map[string]int64{}
	for r, n := range stats.GiveUps {
		want[r.String()] = int64(n)
	}
	require.Equal(t, want, m.values(t, MetricGiveUps, "retryhttp.reason"))
	require.Equal(t, map[string]int64{"127.0.0.1": int64(stats.Attempts)}, m.values(t, MetricAttempts, "server.address"))

	n, sum := m.histogram(t, MetricRetryDelay, attribute.String("retryhttp.delay_source", "backoff"))
	var wantSum float64
	for _, d := range delays {
		wantSum += d.Seconds()
	}
	require.EqualValues(t, len(delays), n)
	require.InDelta(t, wantSum, sum, 1e-9)
	require.EqualValues(t, stats.Retries, n, "every wait was followed by its retry")
	// A retry after a failure waits in the budget's line for news of the
	// host; the metric, as the counter, counts those let go.
	require.EqualValues(t, stats.BudgetWaits, m.count(t, MetricBudgetWaits), MetricBudgetWaits)
	require.EqualValues(t, stats.BudgetRefusals, m.count(t, MetricBudgetDenials), MetricBudgetDenials)
	require.Zero(t, m.count(t, MetricThrottleRejections), MetricThrottleRejections)
	require.Equal(t, "s", m[MetricRetryDelay].Unit)
	require.Equal(t, "{attempt}", m[MetricAttempts].Unit)
}

// A hedge is no retry: retryhttp.retries counts the attempts after a
// failed one, as Stats.Retries does, retryhttp.hedges the hedges, as
// Stats.Hedges does, and the delay histogram the waits before retries
// alone. Attempts 1 and 2 (a hedge, 10 ms after it) fail; attempt 3, the
// retry, succeeds.
func TestHedgesAreNoRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n < 3 {
				time.Sleep(30 * time.Millisecond)
				return testutil.Response(req, 503, nil, ""), nil
			}
			return testutil.Response(req, 200, nil, ""), nil
		}}
		tr := &retryhttp.Transport{Base: base, Budget: retryhttp.UnlimitedBudget(), Policy: retryhttp.Policy{
			Backoff: retryhttp.Constant(time.Millisecond),
			Hedge:   &retryhttp.Hedge{After: 10 * time.Millisecond, Fraction: 1}}}
		c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
		resp, err := c.Get("http://svc.test/")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, 200, resp.StatusCode)
		stats := tr.Stats()
		require.EqualValues(t, 3, stats.Attempts)
		require.EqualValues(t, 1, stats.Hedges)
		require.EqualValues(t, 1, stats.Retries)
		m := tel.metrics(t)
		require.EqualValues(t, 1, m.count(t, MetricRetries))
		require.EqualValues(t, 1, m.count(t, MetricHedges))
		require.Equal(t, "{attempt}", m[MetricHedges].Unit)
		n, _ := m.histogram(t, MetricRetryDelay)
		require.EqualValues(t, 1, n, "the retry's wait, not the hedge's")
		requests, _ := requestSpans(tel.ended())
		require.Len(t, requests, 1)
		var events []string
		for _, e := range requests[0].Events {
			events = append(events, e.Name)
		}
		require.Equal(t, []string{"retryhttp.hedge", "retryhttp.retry"}, events)
	})
}

// The metrics name at most WithMaxHosts hosts: the first ones seen, in
// lower case; the rest are "_OTHER". Spans still name every host (the
// requests are given up on, so that they have spans).
func TestHostsBeyondTheBoundAreOther(t *testing.T) {
	tel := newTelemetry()
	c := &http.Client{Transport: NewTransport(&retryhttp.Transport{Base: unavailable(), Policy: once}, tel.options(WithMaxHosts(2))...)}
	for _, u := range []string{"http://a.test/", "http://b.test/", "http://c.test/", "http://A.TEST:8080/", "http://d.test/"} {
		resp, err := c.Get(u)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	m := tel.metrics(t)
	require.Equal(t, map[string]int64{"a.test": 2, "b.test": 1, "_OTHER": 2}, m.values(t, MetricAttempts, "server.address"))
	requests, _ := requestSpans(tel.ended())
	var hosts []string
	for _, s := range requests {
		v, _ := attr(s.Attributes, "server.address")
		hosts = append(hosts, v.AsString())
	}
	require.Equal(t, []string{"a.test", "b.test", "c.test", "a.test", "d.test"}, hosts)
}

// Past maxRoutes (method, scheme and host as spelled), requests still
// record what the others do, with routes made for them and not kept: the
// host bound, the spans' hosts and names (the requests are given up on, so
// that they have spans).
func TestRoutesBeyondTheBound(t *testing.T) {
	tel := newTelemetry()
	tr := NewTransport(&retryhttp.Transport{Base: unavailable(), Policy: once}, tel.options(WithMaxHosts(2))...)
	c := &http.Client{Transport: tr}
	n := maxRoutes + 5
	for i := range n {
		resp, err := c.Get(fmt.Sprintf("http://h%d.test/", i))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	for range 2 { // a kept route and one that is not, again
		for _, u := range []string{"http://h0.test/", fmt.Sprintf("http://h%d.test/", n-1)} {
			req, err := http.NewRequest("PURGE", u, nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
		}
	}
	in := tr.(*transport).in
	require.Equal(t, maxRoutes, in.nroutes)
	m := tel.metrics(t)
	require.Equal(t, map[string]int64{"h0.test": 3, "h1.test": 1, "_OTHER": int64(n - 2 + 2)}, m.values(t, MetricAttempts, "server.address"))
	requests, _ := requestSpans(tel.ended())
	require.Len(t, requests, n+4)
	for i, s := range requests[:n] {
		require.Equal(t, "retryhttp GET", s.Name)
		requireAttr(t, s.Attributes, "server.address", fmt.Sprintf("h%d.test", i))
	}
	for i, s := range requests[n:] {
		require.Equal(t, "retryhttp HTTP", s.Name)
		requireAttr(t, s.Attributes, "http.request.method_original", "PURGE")
		requireAttr(t, s.Attributes, "server.address", []string{"h0.test", fmt.Sprintf("h%d.test", n-1)}[i%2])
	}
}

// hostNames holds no more than its bound, however many hosts come, from
// however many goroutines.
func TestHostNamesBounded(t *testing.T) {
	h := hostNames{max: 10}
	var wg sync.WaitGroup
	var named atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if h.name(fmt.Sprintf("h%d.test", (g*7+i)%50)) != other {
					named.Add(1)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	h.seen.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 10, n)
	require.Equal(t, 10, h.n)
	require.Positive(t, named.Load())
}

// A retry that waits for the budget, and one the budget never lets go,
// in fake time: the metrics count the wait and the denial as Stats does,
// and the request's span tells how long each waited, from when.
func TestBudgetWaitsAndDenials(t *testing.T) {
	t.Run("released", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tel := newTelemetry()
			var aCalls atomic.Int32
			base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
				if req.URL.Path == "/b" {
					time.Sleep(100 * time.Millisecond) // in flight when A fails
				}
				if req.URL.Path == "/a" && aCalls.Add(1) == 1 {
					return testutil.Response(req, 503, nil, ""), nil
				}
				return testutil.Response(req, 200, nil, ""), nil
			}}
			var retries []retryhttp.RetryEvent // A's, on its goroutine; read after it ends
			tr := &retryhttp.Transport{
				Base:    base,
				Budget:  retryhttp.NewBudget(0, 0), // a retry waits for news while B is in flight
				Policy:  retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)},
				OnRetry: func(e *retryhttp.RetryEvent) { retries = append(retries, *e) },
			}
			c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
			errc := make(chan error, 1)
			go func() {
				resp, err := c.Get("http://svc.test/b") // a success: news, which the probe waits a silence from
				if err == nil {
					err = resp.Body.Close()
				}
				errc <- err
			}()
			synctest.Wait()                         // B is in flight
			resp, err := c.Get("http://svc.test/a") // A's retry waits in the budget's line
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.NoError(t, <-errc)

			require.Len(t, retries, 1)
			wait := retries[0].BudgetWait
			require.Positive(t, wait)
			stats := tr.Stats()
			m := tel.metrics(t)
			require.EqualValues(t, 1, stats.BudgetWaits)
			require.EqualValues(t, stats.BudgetWaits, m.count(t, MetricBudgetWaits, attribute.String("server.address", "svc.test")))
			require.Zero(t, m.count(t, MetricBudgetDenials))

			requests, _ := requestSpans(tel.ended())
			require.Len(t, requests, 1, "B succeeded at once: it has no span of otelretry's")
			a := requests[0]
			require.Len(t, a.Events, 1)
			e := a.Events[0]
			require.Equal(t, "retryhttp.retry", e.Name)
			requireAttr(t, e.Attributes, "retryhttp.budget_wait", wait.Seconds())
			// The wait in line counts toward the backoff: what is left of it.
			requireAttr(t, e.Attributes, "retryhttp.delay", retries[0].Delay.Seconds())
			// With no credit, B's success lets nothing go; A goes as a probe, a
			// silence of its backoff (1 s) after that news.
			require.Equal(t, 1100*time.Millisecond, wait, "a probe, 1 s after B's success")
			require.Equal(t, 1100*time.Millisecond, retries[0].Delay, "the whole wait: the line's, past its backoff")
			// The event is stamped when the wait began: as A's first
			// attempt failed, in fake time exactly.
			require.Equal(t, base.Calls()[0], e.Time)
			t.Logf("A's retry waited %v in line, %v in all: it went out %v after the failure",
				wait, retries[0].Delay, base.Calls()[2].Sub(base.Calls()[0]))
		})
	})
	t.Run("denied", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tel := newTelemetry()
			base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
				return testutil.Response(req, 503, nil, ""), nil
			}}
			var gaveUp []retryhttp.GiveUpEvent
			tr := &retryhttp.Transport{
				Base:     base,
				Budget:   retryhttp.NewBudget(0, 0),
				Policy:   retryhttp.Policy{MaxAttempts: 2, Backoff: retryhttp.Constant(10 * time.Millisecond)},
				OnGiveUp: func(e *retryhttp.GiveUpEvent) { gaveUp = append(gaveUp, *e) },
			}
			c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
			// No credit, and nothing else in flight to the host: the retry is
			// refused at once.
			ctx := testutil.WithTimeout(t, 500*time.Millisecond)
			resp, err := get(t, ctx, c, "http://svc.test/a")
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())

			require.Len(t, gaveUp, 1)
			require.Equal(t, retryhttp.ReasonBudget, gaveUp[0].Reason)
			stats := tr.Stats()
			m := tel.metrics(t)
			require.EqualValues(t, stats.BudgetRefusals, m.count(t, MetricBudgetDenials))
			require.EqualValues(t, stats.GiveUps[retryhttp.ReasonBudget],
				m.count(t, MetricGiveUps, attribute.String("retryhttp.reason", retryhttp.ReasonBudget.String())))
			require.Zero(t, m.count(t, MetricBudgetWaits), "no retry went")

			requests, _ := requestSpans(tel.ended())
			require.Len(t, requests, 1)
			s := requests[0]
			require.Equal(t, codes.Error, s.Status.Code)
			require.Len(t, s.Events, 1)
			require.Equal(t, "retryhttp.give_up", s.Events[0].Name)
			requireAttr(t, s.Events[0].Attributes, "retryhttp.reason", retryhttp.ReasonBudget.String())
			require.Zero(t, gaveUp[0].BudgetWait, "refused at once")
			for _, a := range s.Events[0].Attributes {
				require.NotEqual(t, "retryhttp.budget_wait", string(a.Key), "no wait to tell")
			}
		})
	})
}

// Adaptive throttling's rejections are counted, as give-ups too, and a
// rejected request's span has no attempt under it.
func TestThrottleRejections(t *testing.T) {
	tel := newTelemetry()
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		return testutil.Response(req, 503, nil, ""), nil
	}}
	tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: 1, Throttle: &retryhttp.Throttle{}}}
	c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
	for i := 0; i < 100 && tr.Stats().Throttled == 0; i++ {
		resp, err := c.Get("http://overloaded.test/")
		if err != nil {
			var e *retryhttp.Error
			require.True(t, errors.As(err, &e) && e.Reason == retryhttp.ReasonThrottled, "%v", err)
			continue
		}
		require.NoError(t, resp.Body.Close())
	}
	stats := tr.Stats()
	require.Positive(t, stats.Throttled, "a host that accepts nothing gets throttled")
	m := tel.metrics(t)
	require.EqualValues(t, stats.Throttled, m.count(t, MetricThrottleRejections, attribute.String("server.address", "overloaded.test")))
	require.EqualValues(t, stats.GiveUps[retryhttp.ReasonThrottled],
		m.count(t, MetricGiveUps, attribute.String("retryhttp.reason", retryhttp.ReasonThrottled.String())))
	require.EqualValues(t, stats.Attempts, m.count(t, MetricAttempts))

	spans := tel.ended()
	requests, _ := requestSpans(spans)
	var throttled int
	for _, s := range requests {
		if v, _ := attr(s.Attributes, "error.type"); v.AsString() == "throttled" {
			throttled++
			require.Empty(t, childrenOf(spans, s), "a throttled request sent nothing")
			requireAttr(t, s.Attributes, "retryhttp.attempts", int64(0))
			require.Equal(t, codes.Error, s.Status.Code)
			require.True(t, strings.Contains(s.Status.Description, "throttled"), s.Status.Description)
		}
	}
	require.EqualValues(t, stats.Throttled, throttled)
}

// Two Transports instrumented with one MeterProvider (two clients of a
// program on the global provider) share the attempts counter, which the
// SDK makes once, and its counts: each one's attempts are reported, and
// both's on one host add up. Another provider has counts of its own.
func TestEveryTransportOfAProviderIsCounted(t *testing.T) {
	tel := newTelemetry()
	var trs []*retryhttp.Transport
	var ins []*instruments
	for _, host := range []string{"a.test", "b.test", "a.test"} {
		tr := &retryhttp.Transport{Base: &testutil.Base{}}
		trs = append(trs, tr)
		rt := NewTransport(tr, tel.options()...)
		ins = append(ins, rt.(*transport).in)
		resp, err := (&http.Client{Transport: rt}).Get("http://" + host + "/")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	require.Same(t, ins[0].counts, ins[1].counts, "one provider's Transports share the counts")
	m := tel.metrics(t)
	require.EqualValues(t, trs[0].Stats().Attempts+trs[2].Stats().Attempts,
		m.count(t, MetricAttempts, attribute.String("server.address", "a.test")))
	require.EqualValues(t, trs[1].Stats().Attempts, m.count(t, MetricAttempts, attribute.String("server.address", "b.test")),
		"the second Transport's attempts")
	other := NewTransport(&retryhttp.Transport{Base: &testutil.Base{}}, newTelemetry().options()...)
	require.NotSame(t, ins[0].counts, other.(*transport).in.counts)
}

// The attempts counter's callback holds the counts of a provider's
// Transports, not their instruments: a Transport that its program drops is
// collected, routes and all.
func TestDroppedTransportIsCollected(t *testing.T) {
	tel := newTelemetry()
	in := func() weak.Pointer[instruments] {
		rt := NewTransport(&retryhttp.Transport{Base: &testutil.Base{}}, tel.options()...)
		return weak.Make(rt.(*transport).in)
	}()
	for range 5 {
		runtime.GC()
	}
	require.True(t, in.Value() == nil, "a dropped Transport's instruments are kept by the MeterProvider")
	runtime.KeepAlive(tel)
}

// A MeterProvider that its program drops, with its Transports, is
// collected: the attempts' counts shared by a provider's Transports hold
// neither the provider nor its instrument.
func TestDroppedMeterProviderIsCollected(t *testing.T) {
	collected := make(chan struct{}, 1)
	func() {
		reader := sdkmetric.NewManualReader()
		runtime.AddCleanup(reader, func(ch chan struct{}) { ch <- struct{}{} }, collected)
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		_ = NewTransport(&retryhttp.Transport{Base: unavailable()}, WithMeterProvider(mp))
	}()
	for range 20 {
		runtime.GC()
		select {
		case <-collected:
			return
		default:
		}
		runtime.Gosched() // cleanups run on a goroutine of their own
	}
	t.Fatal("the MeterProvider's reader was never collected")
}
