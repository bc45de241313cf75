package retryhttp

// Hedging: a copy of a slow first attempt goes at the hedge delay, within
// its limits, and the first good answer wins. Hedged requests keep the
// promises of a single attempt: the caller's request is the caller's again
// once RoundTrip returned, and every losing answer is closed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// slowBase answers each attempt after latency(n) (n counts the attempts it
// receives, from 1), or fails it when its context ends first. It records
// the keys it saw and closes nothing of the caller's: each response body
// records its Close.
type slowBase struct {
	latency func(n int) time.Duration
	status  func(n int) int
	header  http.Header

	mu       sync.Mutex
	n        int
	keys     []string
	bodies   []*testutil.CloseRecorder
	canceled atomic.Int32
}

func (b *slowBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.n++
	n := b.n
	b.keys = append(b.keys, req.Header.Get(defaultKeyHeader))
	b.mu.Unlock()
	if req.Body != nil {
		req.Body.Close()
	}
	t := time.NewTimer(b.latency(n))
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		b.canceled.Add(1)
		return nil, req.Context().Err()
	}
	code := http.StatusOK
	if b.status != nil {
		code = b.status(n)
	}
	body := testutil.NewCloseRecorder(strings.NewReader("answer"))
	b.mu.Lock()
	b.bodies = append(b.bodies, body)
	b.mu.Unlock()
	return &http.Response{StatusCode: code, Header: b.header.Clone(), Body: body, ContentLength: 6, Request: req}, nil
}

func (b *slowBase) Attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// closedOnce asserts that the base answered, and that every body it
// answered with was closed exactly once.
func (b *slowBase) closedOnce(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.NotEmpty(t, b.bodies)
	for i, body := range b.bodies {
		assert.Equal(t, 1, body.Closes(), "answer %d closed once", i+1)
	}
}

// latencies returns a latency function: the i-th attempt takes d[i-1].
func latencies(d ...time.Duration) func(int) time.Duration {
	return func(n int) time.Duration { return d[min(n, len(d))-1] }
}

func hedged(base http.RoundTripper, h Hedge) *Transport {
	return &Transport{Base: base, Policy: Policy{Hedge: &h, Backoff: Constant(0)}, rand: func() float64 { return 0 }}
}

// A first attempt slower than the hedge delay gets a copy at the delay; the
// copy's answer wins, the first is canceled, and the caller learns which
// attempt won.
func TestHedgeAfterTheDelayWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(time.Second, 5*time.Millisecond)}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		var events []RetryEvent
		tr.OnRetry = func(e *RetryEvent) { events = append(events, *e) }
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, 15*time.Millisecond, time.Since(start), "the hedge's 10 ms, then its own 5")
		assert.Equal(t, "answer", testutil.ReadBody(t, resp))
		assert.Equal(t, 2, Attempts(resp), "the hedge won")
		synctest.Wait()
		assert.EqualValues(t, 1, base.canceled.Load(), "the loser was canceled")
		require.Len(t, events, 1)
		assert.True(t, events[0].Hedge)
		assert.Equal(t, "hedge", events[0].Source)
		assert.Equal(t, 10*time.Millisecond, events[0].Delay)
		s := tr.Stats()
		assert.EqualValues(t, 1, s.Hedges)
		assert.EqualValues(t, 1, s.HedgeWins)
		assert.EqualValues(t, 2, s.Attempts)
		assert.Zero(t, s.Retries, "a hedge is no retry: no attempt had failed")
	})
}

// The first attempt answering before the delay is never hedged, and when it
// answers first after a hedge went, the hedge is the one canceled, its
// answer drained and closed.
func TestHedgeLoserIsDrainedAndClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(5 * time.Millisecond)}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		getOK(t, tr)
		assert.Equal(t, 1, base.Attempts(), "no hedge")

		base = &slowBase{latency: latencies(12*time.Millisecond, 3*time.Millisecond)}
		base.status = func(n int) int { return map[int]int{1: 200, 2: 200}[n] }
		tr = hedged(base, Hedge{After: 10 * time.Millisecond})
		// The hedge (10+3 ms) answers after the first (12 ms): both answers
		// arrive, the first wins, the hedge's is drained and closed.
		resp, _ := getOK(t, tr)
		assert.Equal(t, 1, Attempts(resp))
		synctest.Wait()
		base.closedOnce(t)
	})
}

// Only requests that may be sent twice are hedged: a POST without a key is
// not; a keyed one is, with the same key on every copy.
func TestHedgeOnlyWhatMayBeSentTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(time.Second, 5*time.Millisecond)}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		sendOK(t, tr, testutil.NewRequest(t, http.MethodPost, "http://api.test/pay", strings.NewReader("x")))
		assert.Equal(t, 1, base.Attempts(), "no hedge for a POST without a key")

		base = &slowBase{latency: latencies(time.Second, 5*time.Millisecond)}
		tr = hedged(base, Hedge{After: 10 * time.Millisecond})
		tr.Policy.IdempotencyKeys = &IdempotencyKeys{}
		sendOK(t, tr, testutil.NewRequest(t, http.MethodPost, "http://api.test/pay", strings.NewReader("x")))
		require.Equal(t, 2, base.Attempts(), "a keyed POST is hedged")
		assert.NotEmpty(t, base.keys[0])
		assert.Equal(t, base.keys[0], base.keys[1], "one key on every copy")
	})
}

// No hedge past the deadline, none the budget cannot pay for, and none once
// an answer asked for a wait.
func TestHedgeLimits(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &slowBase{latency: latencies(time.Second)}
			tr := hedged(base, Hedge{After: 10 * time.Millisecond})
			ctx := testutil.WithTimeout(t, 8*time.Millisecond)
			_, err := tr.RoundTrip(testutil.Get(t, ctx))
			require.Error(t, err)
			assert.Equal(t, 1, base.Attempts())
		})
	})
	t.Run("budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &slowBase{latency: latencies(50*time.Millisecond, time.Millisecond)}
			tr := hedged(base, Hedge{After: 10 * time.Millisecond})
			tr.Budget = NewBudget(0, 0)
			getOK(t, tr)
			assert.Equal(t, 1, base.Attempts(), "the budget pays for no hedge")
		})
	})
	t.Run("Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &slowBase{latency: latencies(100*time.Millisecond, time.Millisecond, time.Millisecond),
				header: http.Header{"Retry-After": {"1"}}}
			base.status = func(n int) int { return map[int]int{1: 200, 2: 503, 3: 200}[n] }
			tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 2})
			resp, _ := getOK(t, tr)
			assert.Equal(t, 2, base.Attempts(), "the 503 asking for a wait stopped the second hedge")
			assert.Equal(t, 1, Attempts(resp), "the first attempt won")
		})
	})
	t.Run("fraction", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &slowBase{latency: func(int) time.Duration { return 20 * time.Millisecond }}
			tr := hedged(base, Hedge{After: 10 * time.Millisecond})
			tr.Budget = UnlimitedBudget()
			for range 100 {
				getOK(t, tr)
			}
			assert.EqualValues(t, 6, tr.Stats().Hedges, "5 % of 100 requests, and the first")
		})
	})
}

// When the first attempt fails while a hedge runs, the hedge's answer is
// awaited; when both fail, the retry that follows is numbered after both.
func TestHedgeAfterTheFirstAttemptFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(20*time.Millisecond, 30*time.Millisecond)}
		base.status = func(n int) int { return map[int]int{1: 503, 2: 200}[n] }
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		start := time.Now()
		resp, body := getOK(t, tr)
		assert.Equal(t, "answer", body)
		assert.Equal(t, 2, Attempts(resp))
		assert.Equal(t, 40*time.Millisecond, time.Since(start), "the hedge's answer at 10+30 ms")

		base = &slowBase{latency: latencies(20*time.Millisecond, 30*time.Millisecond, time.Millisecond)}
		base.status = func(n int) int { return map[int]int{1: 503, 2: 503, 3: 200}[n] }
		tr = hedged(base, Hedge{After: 10 * time.Millisecond})
		resp, _ = getOK(t, tr)
		assert.Equal(t, 3, Attempts(resp), "the retry after two failed attempts is the third")
		synctest.Wait()
		base.closedOnce(t)
	})
}

// A hedge the allowance refuses is looked for again a delay later: once
// other requests have earned the allowance, the slow request gets its hedge
// instead of waiting for its first attempt.
func TestHedgeRefusedIsTriedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool // the next first attempt is slow
		base := &slowBase{latency: func(int) time.Duration {
			if slow.Swap(false) {
				return time.Second
			}
			return time.Millisecond
		}}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		tr.Budget = UnlimitedBudget()
		get := func() {
			getOK(t, tr)
		}
		slow.Store(true)
		get() // spends the allowance's one hedge of slack
		require.EqualValues(t, 1, tr.Stats().Hedges)

		slow.Store(true)
		done := make(chan time.Duration)
		go func() {
			start := time.Now()
			get()
			done <- time.Since(start)
		}()
		time.Sleep(15 * time.Millisecond) // past the delay: refused
		synctest.Wait()
		require.EqualValues(t, 1, tr.Stats().Hedges, "no allowance yet")
		for range 20 { // earn allowance: 5 % of 22 requests
			get()
		}
		took := <-done
		assert.EqualValues(t, 2, tr.Stats().Hedges)
		assert.Less(t, took, 100*time.Millisecond, "hedged once allowed, not held for its 1 s first attempt")
	})
}

// A hedging judges answers as a request does: a hedge's 400 that the server
// says is worth retrying does not win; the first attempt's 200 does.
func TestHedgeWinnerIsJudgedAsAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(30*time.Millisecond, time.Millisecond),
			header: http.Header{"X-Should-Retry": {"true"}}}
		base.status = func(n int) int { return map[int]int{1: 200, 2: 400}[n] }
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		resp, _ := getOK(t, tr)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 1, Attempts(resp), "the first attempt won")
		assert.Zero(t, tr.Stats().HedgeWins)
	})
}

// Many callers at once, some hedged and some not, through a real loopback
// server that answers each request with its own id, half of them after the
// hedge delay: every caller gets its own answer, and every attempt reaches
// the server as its own request.
func TestHedgedRequestsKeepTheirAnswersApart(t *testing.T) {
	var served, hedges, hedged atomic.Int64 // attempts, hedges, requests hedged
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		id := r.URL.Query().Get("id")
		if r.Header.Get("X-Id") != id {
			t.Errorf("request %s carried the header of %s", id, r.Header.Get("X-Id"))
		}
		// Half the first attempts outlast the hedge delay.
		var n int
		fmt.Sscan(id, &n)
		select {
		case <-time.After(time.Duration(n%2) * 25 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, id)
	}))
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, Budget: UnlimitedBudget(),
		Policy: Policy{Hedge: &Hedge{After: 10 * time.Millisecond, Fraction: 1, MaxHedges: 2}},
		OnRetry: func(e *RetryEvent) {
			if e.Hedge {
				hedges.Add(1)
				if e.Attempt == 1 {
					hedged.Add(1)
				}
			}
		}}
	defer tr.CloseIdleConnections()
	const callers, each = 16, 40
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				id := strconv.Itoa(c*each + i)
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/?id="+id, nil)
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("X-Id", id)
				resp, err := tr.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, id, string(got), "the answer to request %s", id)
				if Attempts(resp) == 1 {
					assert.Same(t, req, resp.Request, "the first attempt's answer carries the caller's request")
				} else {
					assert.Same(t, req.URL, resp.Request.URL, "a hedge's, a copy of the caller's")
				}
			}
		})
	}
	wg.Wait()
	assert.Positive(t, hedged.Load(), "some requests were hedged")
	assert.Less(t, hedged.Load(), int64(callers*each), "some were not")
	// A hedge that lost while it was still connecting never arrives.
	assert.GreaterOrEqual(t, served.Load(), int64(callers*each), "every request reached the server")
	assert.LessOrEqual(t, served.Load(), int64(callers*each)+hedges.Load(), "and no attempt twice")
}

// A request made from the context of a response that took 3 attempts (the
// next page of a listing) is a request of its own: its answer, first time,
// reports Attempts 1, hedging on or off.
func TestHedgeFirstAttemptUnderAStaleContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		retrying := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503, 503, 200)},
			Policy: Policy{Backoff: Constant(0)}}
		resp, _ := sendOK(t, retrying, testutil.Get(t, t.Context()))
		require.Equal(t, 3, Attempts(resp))
		markedBefore := resp.Request.Context()

		for _, h := range []*Hedge{nil, {After: time.Hour}} {
			tr := &Transport{Base: &testutil.Base{}, Policy: Policy{Hedge: h}}
			req, err := http.NewRequestWithContext(markedBefore, http.MethodGet, "http://example.test/next", nil)
			require.NoError(t, err)
			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, 1, Attempts(resp), "hedging on: %v", h != nil)
		}
	})
}

// When every attempt of a hedging fails, each attempt's own context still
// ends, once the request is over and the answer's body closed: none stays
// registered with a long-lived caller's context.
func TestHedgeContextsEndWhenEveryAttemptFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ctxs []context.Context
		base := &slowBase{latency: latencies(50*time.Millisecond, 20*time.Millisecond),
			status: func(int) int { return http.StatusServiceUnavailable }}
		rec := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			ctxs = append(ctxs, req.Context())
			mu.Unlock()
			return base.RoundTrip(req)
		})
		tr := &Transport{Base: rec, Policy: Policy{MaxAttempts: 2, Backoff: Constant(0),
			Hedge: &Hedge{After: 10 * time.Millisecond}}, rand: func() float64 { return 0 }}
		parent, cancel := context.WithCancel(t.Context())
		defer cancel()
		resp, err := tr.RoundTrip(testutil.Get(t, parent))
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		testutil.ReadBody(t, resp)
		synctest.Wait()
		require.Len(t, ctxs, 2, "the first attempt and one hedge")
		for i, ctx := range ctxs {
			assert.Error(t, ctx.Err(), "attempt %d's context still open", i+1)
		}
	})
}

// The first attempt answers at the very instant the hedge timer fires,
// 2,000 times: whichever runs first, the hedging ends only once its
// timer's function can no longer run (one ended earlier fails or panics
// here).
func TestHedgeTimerFiresAsTheAnswerArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: func(int) time.Duration { return 10 * time.Millisecond }}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		tr.Budget = UnlimitedBudget()
		const requests = 2000
		for range requests {
			_, body := getOK(t, tr)
			assert.Equal(t, "answer", body)
			synctest.Wait()
		}
		s := tr.Stats()
		assert.EqualValues(t, requests+s.Hedges, base.Attempts(), "every attempt counted once")
	})
}

// Two hedges answering 409 at once judge their answers on the hedging's
// one copy of the call, which a 409 may update (whether the request is
// keyed): under the hedging's lock, as the race detector checks.
func TestHedgesJudgeTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(time.Second, 20*time.Millisecond, 10*time.Millisecond),
			status: func(n int) int { return map[bool]int{true: 200, false: 409}[n == 1] }}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 2, Fraction: 1})
		tr.Budget = UnlimitedBudget()
		getOK(t, tr)
		assert.EqualValues(t, 2, tr.Stats().Hedges)
	})
}

// A request whose deadline comes before the hedge delay is not hedged, but
// its latency still teaches the adaptive delay: after 20 such requests
// answered in 10 ms, the delay has fallen from Max (1 s) to about 10 ms,
// within the next request's deadline, and a slow answer is hedged.
func TestHedgeDelayLearnsFromUnhedgedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const quick = 20
		base := &slowBase{latency: func(n int) time.Duration {
			switch {
			case n <= quick:
				return 10 * time.Millisecond
			case n == quick+1:
				return 200 * time.Millisecond
			}
			return time.Millisecond
		}}
		tr := hedged(base, Hedge{})
		for i := range quick + 1 {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			sendOK(t, tr, testutil.Get(t, ctx))
			cancel()
			if i < quick {
				require.Zero(t, tr.Stats().Hedges, "no hedging before the delay adapts")
			}
		}
		assert.EqualValues(t, 1, tr.Stats().Hedges, "the slow answer was hedged")
		assert.Equal(t, quick+2, base.Attempts())
	})
}

// Over HTTP/2, a hedge that loses is canceled with a stream reset: the
// requests, hedged or not, share a connection (or two), and the server sees
// each loser's request end early. (Over HTTP/1.1 a canceled attempt closes
// its connection instead; the next request dials a new one.)
func TestHedgeOverHTTP2CancelsLosersWithStreamResets(t *testing.T) {
	var conns, canceled atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("a request over HTTP/%d", r.ProtoMajor)
		}
		id := r.URL.Query().Get("id")
		var n int
		fmt.Sscan(id, &n)
		select {
		case <-time.After(time.Duration(n%2) * 30 * time.Millisecond): // odd ids outlast the delay
		case <-r.Context().Done():
			canceled.Add(1)
			return
		}
		io.WriteString(w, id)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := &Transport{Base: base, Budget: UnlimitedBudget(),
		Policy: Policy{Hedge: &Hedge{After: 10 * time.Millisecond, Fraction: 1}}}

	// One request first, so that the others find its connection.
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/?id=0", nil)
	require.NoError(t, err)
	_, body := sendOK(t, tr, req)
	assert.Equal(t, "0", body)

	const callers, each = 8, 10
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				id := strconv.Itoa(1 + c*each + i)
				req, err := http.NewRequest(http.MethodGet, srv.URL+"/?id="+id, nil)
				if !assert.NoError(t, err) {
					return
				}
				resp, err := tr.RoundTrip(req)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, id, testutil.ReadBody(t, resp), "the answer to request %s", id)
			}
		})
	}
	wg.Wait()
	s := tr.Stats()
	assert.GreaterOrEqual(t, s.Hedges, uint64(callers*each/2), "every slow request was hedged")
	// The first attempt started 10 ms earlier and takes as long: it wins,
	// mostly, and its hedge is reset; a hedge that wins resets the first.
	assert.Positive(t, canceled.Load(), "losers' requests ended early at the server")
	assert.LessOrEqual(t, canceled.Load(), int64(s.Hedges), "only losers ended early")
	// net/http may dial a second connection while it checks the first with
	// a PING after a reset; over HTTP/1.1 every canceled loser closes one.
	assert.LessOrEqual(t, conns.Load(), 1+canceled.Load()/8,
		"%d connections for %d losers: a loser costs a stream, not a connection", conns.Load(), canceled.Load())
}

// A hedged request's give-up counts every attempt it sent, the hedges too,
// and Retryable judges each answer as it comes: one it asks to retry does
// not win, and a later one may. Found by the simulation (internal/sim).
func TestRetryAfterARaceCountsTheHedges(t *testing.T) {
	t.Run("given up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// The first attempt answers 503 "do not retry" while the hedge is slow.
			base := &slowBase{latency: latencies(20*time.Millisecond, time.Second),
				status: func(n int) int { return 503 }, header: http.Header{"X-Should-Retry": {"false"}}}
			tr := hedged(base, Hedge{After: 10 * time.Millisecond})
			ev := new(hookLog).watch(tr)
			resp, _ := getOK(t, tr)
			assert.Equal(t, 1, Attempts(resp), "the first attempt answered")
			require.Equal(t, []Reason{ReasonServer}, ev.reasons())
			assert.Equal(t, 2, ev.giveUps[0].Attempts, "attempts made: the first and its hedge")
		})
	})
	t.Run("retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &slowBase{latency: latencies(20*time.Millisecond, time.Second, 0)}
			tr := hedged(base, Hedge{After: 10 * time.Millisecond})
			tr.Policy.MaxAttempts = 2
			tr.Policy.Retryable = func(a *Attempt) bool { return a.Number == 1 } // the first's 200 is not enough
			ev := new(hookLog).watch(tr)
			resp, _ := getOK(t, tr)
			assert.Equal(t, 2, base.Attempts(), "the first and its hedge: MaxAttempts 2")
			assert.Equal(t, 2, Attempts(resp), "the hedge's answer won")
			assert.Empty(t, ev.reasons(), "no give-up")
		})
	})
}

// A Retryable that panics on a hedged request's answer leaves nothing
// open, as without hedging: every answer's body is closed once, and no
// attempt's context is left (under a caller's context of a type the
// context package does not know, testutil.OpaqueCtx, one would run a goroutine).
// Found by the simulation (internal/sim).
func TestRetryablePanicClosesAHedgedAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency []time.Duration
		status  int
	}{
		{"no hedge sent", []time.Duration{time.Millisecond}, 200},
		{"the first wins", []time.Duration{20 * time.Millisecond, time.Second}, 200},
		{"every attempt fails", []time.Duration{20 * time.Millisecond, 15 * time.Millisecond}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &slowBase{latency: latencies(tc.latency...), status: func(int) int { return tc.status }}
				tr := hedged(base, Hedge{After: 10 * time.Millisecond})
				tr.Policy.MaxAttempts = 2
				tr.Policy.Retryable = func(*Attempt) bool { panic("hook panicked") }
				panicsLeavingNoContext(t, tr)
				base.closedOnce(t)
			})
		})
	}
}

// clockedBase is a base on a clock of the test's (clock.Source): a
// testutil.TimerClock, which keeps the timers a Transport set that neither fired nor
// were stopped, or a countingClock.
type clockedBase struct {
	http.RoundTripper
	clk clock.Clock
}

func (b clockedBase) RetryClock() clock.Clock   { return b.clk }
func (b clockedBase) RetryRand() func() float64 { return func() float64 { return 0 } }

// Hedging that ends leaves no hedge timer armed. Here the first attempt
// fails while the second hedge is being made (its PrepareRetry), which
// arms the timer of a third; the first hedge then wins. That timer is
// stopped as the hedging ends, not left to fire after the request is
// over, holding the hedging until then. Found by the simulation (internal/sim).
func TestRaceEndStopsTheHedgeTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		preparing, firstFailed := make(chan struct{}), make(chan struct{})
		clk := testutil.NewTimerClock()
		base := clockedBase{clk: clk}
		base.RoundTripper = testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch AttemptNumber(req.Context()) {
			case 1: // fails once the second hedge is being made, at 20 ms
				<-preparing
				close(firstFailed)
				return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
			case 2: // sent at 10 ms, wins at 25 ms
				time.Sleep(15 * time.Millisecond)
				return testutil.Response(req, http.StatusOK, nil, "ok"), nil
			}
			return testutil.Hang(0, req)
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 3, Fraction: 1})
		tr.PrepareRetry = func(r *http.Request) error {
			if AttemptNumber(r.Context()) == 3 {
				close(preparing)
				<-firstFailed
				time.Sleep(time.Nanosecond) // the first attempt's failure is taken meanwhile
			}
			return nil
		}
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, 2, Attempts(resp))
		testutil.ReadBody(t, resp)
		synctest.Wait()
		assert.Empty(t, clk.Left(), "timers left armed")
	})
}

// A hedge whose timer fires just as the first attempt answers is being
// made (its body, its copy of the request, PrepareRetry) on the timer's
// goroutine: RoundTrip returns only once it is sent or dropped, so that it
// never reads the caller's request after RoundTrip returned (before the
// fix, the hedging, seeing no hedge launched yet, ended at once).
func TestAHedgeBeingMadeHoldsRoundTripUntilItIsSentOrDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		var preparing atomic.Bool
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if AttemptNumber(req.Context()) == 1 {
				<-entered // answers as the hedge is being made
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: time.Millisecond})
		tr.PrepareRetry = func(*http.Request) error {
			preparing.Store(true)
			close(entered)
			time.Sleep(10 * time.Millisecond)
			preparing.Store(false)
			return nil
		}
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.False(t, preparing.Load(), "RoundTrip returned while the hedge was being made")
		assert.Equal(t, 11*time.Millisecond, time.Since(start))
		assert.Equal(t, 1, Attempts(resp), "the first attempt won")
		testutil.ReadBody(t, resp)
	})
}

// A hedge that lost and answers after RoundTrip returned builds nothing
// from the caller's request, which the caller may be reusing: its answer
// keeps the request the base answered, and is closed (before the fix, the
// late answer was given a copy of the caller's request, read after
// RoundTrip returned: a data race, and the caller's next page in it).
func TestALateLosingHedgeDoesNotCopyTheCallersRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var answers []*http.Response
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			d := 5 * time.Millisecond
			if AttemptNumber(req.Context()) == 2 {
				d = 20 * time.Millisecond // the hedge, which does not see its context end
			}
			time.Sleep(d)
			resp := testutil.Response(req, http.StatusOK, nil, "ok")
			mu.Lock()
			answers = append(answers, resp)
			mu.Unlock()
			return resp, nil
		})
		tr := hedged(base, Hedge{After: time.Millisecond})
		req := testutil.Get(t, t.Context())
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, 1, Attempts(resp))
		testutil.ReadBody(t, resp)
		mu.Lock()
		req.Host = "next.page" // the caller's request, for its next call
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, answers, 2)
		assert.NotEqual(t, "next.page", answers[1].Request.Host, "the late answer copied the caller's request")
	})
}

// A hedge that lost is canceled but may still be in the base after
// RoundTrip returned (net/http's write loop can outlive its RoundTrip),
// when the caller may already change its request for the next one: the
// hedge reads a header and a URL of its own, not the caller's new values.
func TestALosingHedgeDoesNotReadTheCallersRequestAfterRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var hedgeSaw []string
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				time.Sleep(200 * time.Millisecond)
				return testutil.Response(req, http.StatusOK, nil, "first"), nil
			}
			<-req.Context().Done()  // the first attempt won
			time.Sleep(time.Second) // still writing the request
			mu.Lock()
			hedgeSaw = []string{req.Header.Get("X-Token"), req.URL.RawQuery}
			mu.Unlock()
			return nil, context.Cause(req.Context())
		}}
		tr := &Transport{Base: base, Policy: Policy{Hedge: &Hedge{After: 100 * time.Millisecond}}}
		req := testutil.NewRequest(t, http.MethodGet, "http://api.test/doc?page=1", nil).WithContext(t.Context())
		req.Header.Set("X-Token", "one")

		_, body := sendOK(t, tr, req)
		assert.Equal(t, "first", body)
		// The request is the caller's again: it reuses it for the next page.
		req.Header.Set("X-Token", "two")
		req.URL.RawQuery = "page=2"
		synctest.Wait()
		time.Sleep(2 * time.Second)

		require.Equal(t, 2, base.Attempts(), "a hedge was sent")
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"one", "page=1"}, hedgeSaw)
	})
}

// With two hedges, the first answering 503 and the second winning, every
// answer that lost is closed: the 503's too.
func TestEveryLosingAnswerOfAHedgingIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lost *testutil.CloseRecorder
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			switch n {
			case 1:
				<-req.Context().Done() // slow; canceled once a hedge won
				return nil, context.Cause(req.Context())
			case 2:
				resp := testutil.Response(req, http.StatusServiceUnavailable, nil, "busy")
				lost = testutil.NewCloseRecorder(resp.Body)
				resp.Body = lost
				return resp, nil
			}
			return testutil.Response(req, http.StatusOK, nil, "hedge 2"), nil
		}}
		tr := &Transport{Base: base, Policy: Policy{
			Hedge: &Hedge{After: 100 * time.Millisecond, MaxHedges: 2, Fraction: 1}}}

		_, body := getOK(t, tr)
		assert.Equal(t, "hedge 2", body)
		synctest.Wait()
		require.Equal(t, 3, base.Attempts())
		require.NotNil(t, lost)
		assert.Equal(t, 1, lost.Closes(), "the 503 of hedge 1 is closed, once")
	})
}

// A hedge whose PrepareRetry fails is not sent, and not counted: Stats
// counts the hedges and retries that reached the base.
func TestAHedgeWhosePrepareRetryFailedIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			time.Sleep(time.Second)
			return testutil.Response(req, http.StatusOK, nil, "first"), nil
		}}
		tr := &Transport{Base: base, Policy: Policy{
			Hedge: &Hedge{After: 100 * time.Millisecond, MaxHedges: 2, Fraction: 1}}}
		var prepared int
		tr.PrepareRetry = func(*http.Request) error {
			prepared++
			return errors.New("no token")
		}

		_, body := getOK(t, tr)
		assert.Equal(t, "first", body)
		assert.Equal(t, 1, prepared, "one hedge prepared, none after it")
		assert.Equal(t, 1, base.Attempts())
		s := tr.Stats()
		assert.Zero(t, s.Hedges)
		assert.Zero(t, s.Retries)
		assert.EqualValues(t, 1, s.Attempts)
	})
}

// A huge MaxHedges neither crashes nor allocates by its size: hedges are
// bounded by MaxAttempts too, and the hedging holds room for those that can
// actually be sent.
func TestHugeMaxHedgesSendsWhatMaxAttemptsAllows(t *testing.T) {
	for _, maxHedges := range []int{math.MaxInt, 1 << 24} {
		t.Run(fmt.Sprint(maxHedges), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
					if n > 1 {
						<-req.Context().Done() // the hedges lose
						return nil, context.Cause(req.Context())
					}
					time.Sleep(time.Second)
					return testutil.Response(req, http.StatusOK, nil, "first"), nil
				}}
				tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 3,
					Hedge: &Hedge{After: 10 * time.Millisecond, MaxHedges: maxHedges, Fraction: 1}}}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)

				_, body := getOK(t, tr)
				assert.Equal(t, "first", body)
				runtime.ReadMemStats(&after)
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated")
				synctest.Wait()
				assert.Equal(t, 3, base.Attempts(), "the first attempt and 2 hedges")
				assert.EqualValues(t, 2, tr.Stats().Hedges)
			})
		})
	}
}

// A hedged GET whose first attempt answers 503 asking for a wait
// (Retry-After) and whose hedge answers a plain 503 later: the wait holds
// for the request. Asked 2 s, its retry goes 2 s after the last answer,
// not at the backoff; asked an hour, past MaxRetryAfter, the first
// attempt's answer goes back to the caller as soon as the hedge's is in,
// with ReasonRetryAfter, and no retry follows.
func TestAHedgedAnswerAskingForAWaitHoldsForTheRequest(t *testing.T) {
	for _, tc := range []struct {
		retryAfter string
		attempts   int
		took       time.Duration
		reasons    []Reason
	}{
		{"2", 3, 40*time.Millisecond + 2*time.Second, nil},
		{"3600", 2, 40 * time.Millisecond, []Reason{ReasonRetryAfter}},
	} {
		t.Run("Retry-After "+tc.retryAfter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					switch n.Add(1) {
					case 1: // at 20 ms: 503, come back later
						time.Sleep(20 * time.Millisecond)
						return testutil.Response(req, http.StatusServiceUnavailable,
							http.Header{"Retry-After": {tc.retryAfter}}, "wait"), nil
					case 2: // the hedge, sent at 10 ms: a plain 503 at 40 ms
						time.Sleep(30 * time.Millisecond)
						return testutil.Response(req, http.StatusServiceUnavailable, nil, "plain"), nil
					}
					return testutil.Response(req, http.StatusOK, nil, "ok"), nil
				})
				tr := hedged(base, Hedge{After: 10 * time.Millisecond})
				h := new(hookLog).watch(tr)
				start := time.Now()
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				body := testutil.ReadBody(t, resp)
				assert.Equal(t, tc.took, time.Since(start))
				assert.EqualValues(t, tc.attempts, n.Load(), "attempts sent")
				assert.Equal(t, tc.reasons, h.reasons())
				if tc.reasons != nil {
					assert.Equal(t, "wait", body, "the answer that asked for the wait")
					assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				}
			})
		})
	}
}

// A losing answer's drain ends by the caller's deadline: the first attempt
// answers 503 at 20 ms with a body that ignores contexts and ends only
// when closed; the hedge, sent at 10 ms, wins with a 200 at 60 ms. The
// 503's drain, cut off after respbody.MinTime (50 ms) at the most, is cut
// off at the 70 ms deadline instead, and RoundTrip returns by then.
func TestALosingAnswersDrainEndsByTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				time.Sleep(20 * time.Millisecond)
				b := &endingBody{closed: make(chan struct{})}
				b.end = b.closed
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{},
					Body: b, ContentLength: -1, Request: req}, nil
			}
			time.Sleep(50 * time.Millisecond)
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		ctx := testutil.WithTimeout(t, 70*time.Millisecond)
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err)
		assert.LessOrEqual(t, time.Since(start), 70*time.Millisecond, "returned by the deadline")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Body.Close()
	})
}

// A request of one attempt is never hedged: a hedge is an attempt more.
func TestARequestOfOneAttemptIsNotHedged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(time.Second, 5*time.Millisecond)}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		tr.Policy.MaxAttempts = 1
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, time.Second, time.Since(start), "the first attempt's own answer")
		assert.Equal(t, 1, Attempts(resp))
		assert.Zero(t, tr.Stats().Hedges)
	})
}

// MaxHedges bounds the copies of a request: with every attempt slow, a
// request with MaxHedges 2 (and attempts to spare) sends its first attempt
// and two hedges, no more.
func TestMaxHedgesBoundsTheCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			n.Add(1)
			select {
			case <-time.After(time.Second):
			case <-req.Context().Done(): // a loser, canceled
				return nil, req.Context().Err()
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 2, Fraction: 1})
		tr.Policy.MaxAttempts = 10
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		synctest.Wait()
		assert.Equal(t, int32(3), n.Load(), "the first attempt and two hedges")
		assert.EqualValues(t, 2, tr.Stats().Hedges)
	})
}

// Of two failed answers in a race asking for the same wait, the later is
// the one the request acts on: past MaxRetryAfter, it goes back to the
// caller.
func TestOfTwoEqualWaitsTheLaterAnswerGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			wait := http.Header{"Retry-After": {"3600"}}
			if n.Add(1) == 1 { // at 20 ms
				time.Sleep(20 * time.Millisecond)
				return testutil.Response(req, http.StatusServiceUnavailable, wait, "first"), nil
			}
			time.Sleep(30 * time.Millisecond) // the hedge, sent at 10 ms: at 40 ms
			return testutil.Response(req, http.StatusServiceUnavailable, wait, "second"), nil
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "second", testutil.ReadBody(t, resp))
		assert.EqualValues(t, 2, n.Load())
	})
}

// The adaptive hedge delay is the quantile of the host's latency: its
// first attempts that answered before a hedge went teach it. Twenty GETs
// answered in 10 ms under a Max of 50 ms, and the next slow one is hedged
// 10 ms in (the top of the histogram's bucket, at most 19 % above), not at
// Max.
func TestTheHedgeDelayFollowsTheFirstAttemptsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var slow atomic.Bool
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			d := 10 * time.Millisecond
			switch {
			case AttemptNumber(req.Context()) > 1:
				d = time.Millisecond // the hedge
			case slow.Load():
				d = time.Second
			}
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{Max: 50 * time.Millisecond, Fraction: 1})
		tr.Budget = UnlimitedBudget()
		for range 20 {
			getOK(t, tr)
		}
		require.Zero(t, tr.Stats().Hedges, "each answered before Max")
		slow.Store(true)
		start := time.Now()
		resp, _ := getOK(t, tr)
		took := time.Since(start)
		assert.Equal(t, 2, Attempts(resp), "the hedge won")
		assert.GreaterOrEqual(t, took, 11*time.Millisecond, "hedged at 10 ms, answered 1 ms later")
		assert.LessOrEqual(t, took, 12*time.Millisecond+900*time.Microsecond, "hedged within the bucket")
	})
}

// A hedge that wins teaches the adaptive delay its latency, once. Twenty
// GETs whose first attempts never answer are hedged at Max (50 ms), each
// hedge answering in 5 ms; with the delay at their lower quartile, the next
// is hedged 5 ms in: not at Max, as a wrong latency would put it, nor at
// Min (2 ms), as counting each win's latency twice, once as 0, would.
func TestTheHedgeDelayFollowsTheWinningHedgesLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			d := time.Hour
			if AttemptNumber(req.Context()) > 1 {
				d = 5 * time.Millisecond
			}
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{Max: 50 * time.Millisecond, Quantile: 0.25, Fraction: 1})
		tr.Budget = UnlimitedBudget()
		for range 20 {
			getOK(t, tr)
		}
		require.EqualValues(t, 20, tr.Stats().HedgeWins)
		start := time.Now()
		getOK(t, tr)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 10*time.Millisecond, "hedged at 5 ms, answered 5 ms later")
		assert.LessOrEqual(t, took, 11*time.Millisecond, "hedged within the bucket")
	})
}

// ctxBody reads r while ctx lasts, then fails with ctx's error, as a body
// read from a connection does once its request's context ends.
type ctxBody struct {
	ctx context.Context
	r   io.Reader
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *ctxBody) Close() error { return nil }

// The answer hedging returns keeps its attempt's context until its body is
// closed, whether it won or was the last failure: the other attempts are
// canceled, not it, so its body reads whole.
func TestTheAnswerOfAHedgingReadsWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int // both attempts'
		first  time.Duration
	}{
		{"a hedge that wins", http.StatusOK, time.Hour},
		{"a hedge that fails last", http.StatusServiceUnavailable, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					ctx, d := req.Context(), tc.first
					if AttemptNumber(ctx) > 1 {
						d = 30 * time.Millisecond // the hedge, sent at 10 ms: at 40 ms
					}
					select {
					case <-time.After(d):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					resp := testutil.Response(req, tc.status, nil, "")
					resp.Body = &ctxBody{ctx, strings.NewReader(fmt.Sprint("attempt ", AttemptNumber(ctx)))}
					return resp, nil
				})
				tr := hedged(base, Hedge{After: 10 * time.Millisecond})
				tr.Policy.MaxAttempts = 2
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				synctest.Wait() // the other attempt's end has come
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, "attempt 2", string(b))
				assert.Equal(t, tc.status, resp.StatusCode)
				resp.Body.Close()
			})
		})
	}
}

// A hedge's failed answer asking for a wait stops the copies: the first
// attempt is still out, and no more hedges go (MaxHedges 3 would allow two
// more, at 20 and 30 ms); the first attempt's answer is the request's.
func TestAHedgesAnswerAskingForAWaitStopsTheCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			n.Add(1)
			if AttemptNumber(req.Context()) > 1 { // sent at 10 ms, answers at 15
				time.Sleep(5 * time.Millisecond)
				return testutil.Response(req, http.StatusServiceUnavailable,
					http.Header{"Retry-After": {"1"}}, "wait"), nil
			}
			time.Sleep(100 * time.Millisecond)
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 3, Fraction: 1})
		tr.Policy.MaxAttempts = 10
		resp, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
		assert.Equal(t, 1, Attempts(resp))
		assert.EqualValues(t, 2, n.Load(), "the first attempt and one hedge")
		assert.EqualValues(t, 1, tr.Stats().Hedges)
	})
}

// A hedge made while the first attempt wins is dropped before it is sent,
// and the body GetBody made for it is closed.
func TestAHedgeDroppedAsItIsMadeClosesItsBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered := make(chan struct{})
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			<-entered // answers as the hedge is being made
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: time.Millisecond})
		tr.PrepareRetry = func(*http.Request) error {
			close(entered)
			time.Sleep(10 * time.Millisecond) // the first attempt wins meanwhile
			return nil
		}
		req := testutil.NewRequest(t, http.MethodPut, "http://api.test/things", nil)
		var bodies []*testutil.CloseRecorder
		req.GetBody = func() (io.ReadCloser, error) {
			b := testutil.NewCloseRecorder(strings.NewReader("thing"))
			bodies = append(bodies, b)
			return b, nil
		}
		req.Body, _ = req.GetBody()
		req.ContentLength = 5
		resp, _ := sendOK(t, tr, req.WithContext(t.Context()))
		assert.Equal(t, 1, Attempts(resp), "the first attempt won")
		assert.Zero(t, tr.Stats().Hedges, "the hedge was not sent")
		require.Len(t, bodies, 2, "the caller's body and the hedge's")
		assert.Equal(t, 1, bodies[1].Closes(), "the dropped hedge's body closed")
	})
}

// A hedge's failed answer that hedging has not taken yet when the first
// attempt wins is closed as hedging ends: the hedge, sent at 10 ms, fails
// with a 503 at 15 ms; the first attempt's 200 at 20 ms wins.
func TestAFailedHedgeLeftWhenTheFirstWinsIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(20*time.Millisecond, 5*time.Millisecond),
			status: func(n int) int { return map[int]int{1: http.StatusOK, 2: http.StatusServiceUnavailable}[n] }}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		resp, _ := getOK(t, tr)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the first attempt won")
		assert.Equal(t, 1, Attempts(resp))
		synctest.Wait()
		assert.Equal(t, 2, base.Attempts())
		base.closedOnce(t)
	})
}

// The first attempt's failed answer asking for a wait stops the copies,
// even while a hedge is being made: that hedge goes (it was let go), but
// the timer it sets sends no other. A plain failure stops nothing. The
// first hedge is made from 1 ms to 11 ms; each hedge answers a 200 20 ms
// after it is sent; MaxHedges 2 allows another at 12 ms.
func TestAFirstAnswerAskingForAWaitStopsTheCopiesBeingMade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   http.Header
		attempts int32
	}{
		{"Retry-After: 1", http.Header{"Retry-After": {"1"}}, 2},
		{"no wait", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				entered := make(chan struct{})
				var n atomic.Int32
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					n.Add(1)
					if AttemptNumber(req.Context()) == 1 {
						<-entered // answers as the hedge is being made
						return testutil.Response(req, http.StatusServiceUnavailable, tc.header, "503"), nil
					}
					select {
					case <-time.After(20 * time.Millisecond):
					case <-req.Context().Done(): // the second hedge, losing
						return nil, req.Context().Err()
					}
					return testutil.Response(req, http.StatusOK, nil, "ok"), nil
				})
				tr := hedged(base, Hedge{After: time.Millisecond, MaxHedges: 2, Fraction: 1})
				tr.Policy.MaxAttempts = 5
				tr.PrepareRetry = func(*http.Request) error {
					if n.Load() == 1 {
						close(entered)
						time.Sleep(10 * time.Millisecond)
					}
					return nil
				}
				resp, body := getOK(t, tr)
				assert.Equal(t, "ok", body)
				assert.Equal(t, 2, Attempts(resp), "the first hedge won")
				assert.Equal(t, tc.attempts, n.Load(), "attempts sent")
			})
		})
	}
}

// A hedge that is not sent ends its context: PrepareRetry failed for it, or
// the body GetBody makes for it failed; the first attempt's answer is the
// request's either way.
func TestAHedgeNotSentEndsItsContext(t *testing.T) {
	for _, fail := range []string{"PrepareRetry", "GetBody"} {
		t.Run(fail, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					time.Sleep(20 * time.Millisecond)
					return testutil.Response(req, http.StatusOK, nil, "first"), nil
				})
				tr := hedged(base, Hedge{After: 10 * time.Millisecond})
				var hedgeCtx context.Context
				tr.PrepareRetry = func(req *http.Request) error {
					hedgeCtx = req.Context()
					if fail == "PrepareRetry" {
						return errors.New("no token")
					}
					return nil
				}
				req := testutil.NewRequest(t, http.MethodPut, "http://api.test/things", nil)
				made := 0
				req.GetBody = func() (io.ReadCloser, error) {
					if made++; made > 1 && fail == "GetBody" {
						return nil, errors.New("gone")
					}
					return io.NopCloser(strings.NewReader("thing")), nil
				}
				req.Body, _ = req.GetBody()
				req.ContentLength = 5
				_, body := sendOK(t, tr, req.WithContext(t.Context()))
				assert.Equal(t, "first", body)
				assert.Zero(t, tr.Stats().Hedges, "no hedge sent")
				if fail == "PrepareRetry" {
					require.NotNil(t, hedgeCtx)
					assert.Error(t, hedgeCtx.Err(), "the hedge's context ended")
				}
			})
		})
	}
}

// MaxHedges bounds the copies a request gets while every attempt is slow:
// with MaxHedges 2 and both hedges as slow as the first, no third goes at
// the next delay.
func TestMaxHedgesBoundsTheCopiesOfASlowRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(100 * time.Millisecond)}
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 2, Fraction: 1})
		resp, _ := getOK(t, tr)
		assert.Equal(t, 1, Attempts(resp), "the first attempt answered first")
		synctest.Wait()
		assert.Equal(t, 3, base.Attempts(), "the first and two hedges, at 10 and 20 ms")
		assert.EqualValues(t, 2, tr.Stats().Hedges)
	})
}

// A hedged request too close to its deadline for a hedge goes alone, and a
// Retryable that panics on its answer leaves that answer closed, as it does
// any other. Found by the simulation (-sim.n=300000, seed 46882).
func TestRetryablePanicClosesTheAnswerOfARequestTooCloseToItsDeadlineToHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(time.Millisecond), status: func(int) int { return http.StatusUnprocessableEntity }}
		tr := hedged(base, Hedge{}) // adaptive: 1 s before a host has its latencies
		tr.Policy.Retryable = func(*Attempt) bool { panic("hook panicked") }
		ctx := testutil.WithTimeout(t, 300*time.Millisecond)
		assert.PanicsWithValue(t, "hook panicked", func() { tr.RoundTrip(testutil.Get(t, ctx)) })
		assert.Equal(t, 1, base.Attempts())
		base.closedOnce(t)
	})
}
