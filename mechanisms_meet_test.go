package retryhttp

// Where two mechanisms meet (issue 48): a caller's cancellation and the
// last answer, the table of hosts and a request in flight, hedging and the
// Backoff, a hedge's Retry-After: 0, a failed body and the budget's line,
// hedging and Retryable, hedging and a server's wait. Each test pins the
// documented behaviour, and fails while the bug it names is there.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// Pins: a failure that comes back as the caller cancels is given up on and
// reported, once: with the reason that ended its retries, the caller's
// where a retry could have followed, else that of the attempts spent.
func TestACancelAsTheLastAnswerArrivesIsReported(t *testing.T) {
	for _, tc := range []struct {
		maxAttempts int
		reason      Reason
	}{{2, ReasonExhausted}, {3, ReasonCanceled}} {
		t.Run(fmt.Sprint("MaxAttempts ", tc.maxAttempts), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				if n == 2 {
					cancel() // the caller gives up as the second 503 comes back
				}
				return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
			}}
			tr := &Transport{Base: base, Policy: Policy{MaxAttempts: tc.maxAttempts, Backoff: Constant(0)},
				Budget: UnlimitedBudget()}
			h := new(hookLog).watch(tr)
			resp, err := testutil.RoundTrip(t, tr, testutil.Get(t, ctx))
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, 2, base.Attempts())
			assert.Equal(t, tc.reason, StopReason(resp), "StopReason of the 503 returned")
			assert.Equal(t, []Reason{tc.reason}, h.reasons(), "the reasons OnGiveUp was called with")
			assert.Equal(t, map[Reason]uint64{tc.reason: 1}, tr.Stats().GiveUps, "Stats().GiveUps")
		})
	}
}

// Pins: past 1024 hosts, one with a request in flight is kept (no budget, or beneath another Transport).
func TestAHostWithARequestInFlightIsNotForgotten(t *testing.T) {
	for _, beneath := range []bool{false, true} {
		t.Run(map[bool]string{false: "UnlimitedBudget", true: "beneath another Transport"}[beneath], func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Host == "a.test" {
					close(entered)
					<-release
				}
				return testutil.Response(req, http.StatusOK, nil, "ok"), nil
			})
			tracked := &Transport{Base: base, TrackHosts: 1, Budget: UnlimitedBudget()}
			var front http.RoundTripper = tracked
			if beneath {
				tracked.Budget = nil // never used: the Transport above decides
				front = &Transport{Base: tracked}
			}
			done := make(chan error)
			go func() {
				resp, err := front.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://a.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			<-entered // a.test's request is in flight, in the base
			for i := range 1100 {
				sendOK(t, front, testutil.NewRequest(t, http.MethodGet, fmt.Sprintf("http://h%d.test/", i), nil))
			}
			close(release)
			require.NoError(t, <-done)
			got, ok := tracked.HostStats()["a.test"]
			require.True(t, ok, "a.test's counters: the host was forgotten while its request was in flight")
			assert.EqualValues(t, 1, got.Requests)
			assert.EqualValues(t, 1, got.Attempts)
		})
	}
}

// Pins: a hedge is no retry: the first retry after a failed hedging gets Backoff.Delay's n = 0.
func TestAHedgeIsNoRetryToTheBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{latency: latencies(20*time.Millisecond, 5*time.Millisecond, 0)}
		base.status = func(n int) int { return map[int]int{1: 503, 2: 503, 3: 200}[n] }
		var mu sync.Mutex
		var ns []int
		tr := hedged(base, Hedge{After: 10 * time.Millisecond})
		tr.Budget = UnlimitedBudget()
		tr.Policy.Backoff = testutil.BackoffFunc(func(n int, _ time.Duration, _ float64) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			ns = append(ns, n)
			return 0
		})
		resp, _ := getOK(t, tr)
		assert.Equal(t, 3, Attempts(resp), "the first attempt, its hedge, the retry")
		assert.EqualValues(t, 1, tr.Stats().Retries)
		require.NotEmpty(t, ns)
		assert.Equal(t, 0, ns[0], "Backoff.Delay's n for the first retry: no retry was made before it")
	})
}

// Pins: a hedge's Retry-After: 0 asks for no wait and does not stop the copies: the next hedge goes and wins.
func TestARetryAfterOfZeroDoesNotStopTheCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch AttemptNumber(req.Context()) {
			case 1: // slow: 1 s
				select {
				case <-time.After(time.Second):
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
				return testutil.Response(req, http.StatusOK, nil, "first"), nil
			case 2: // sent at 10 ms: 503, Retry-After: 0 at 12 ms
				time.Sleep(2 * time.Millisecond)
				return testutil.Response(req, http.StatusServiceUnavailable, http.Header{"Retry-After": {"0"}}, "now"), nil
			}
			time.Sleep(5 * time.Millisecond) // sent at 20 ms: 200 at 25 ms
			return testutil.Response(req, http.StatusOK, nil, "third"), nil
		})
		tr := hedged(base, Hedge{After: 10 * time.Millisecond, MaxHedges: 2, Fraction: 1})
		tr.Policy.MaxAttempts = 10
		start := time.Now()
		resp, body := getOK(t, tr)
		assert.EqualValues(t, 2, tr.Stats().Hedges, "the second hedge went")
		assert.Equal(t, "third", body, "the second hedge won")
		assert.Equal(t, 3, Attempts(resp))
		assert.Equal(t, 25*time.Millisecond, time.Since(start))
	})
}

// meetLateBody is a response body whose bytes arrive at a time; Close ends
// a read waiting for them.
type meetLateBody struct {
	at   time.Time
	rest io.Reader
	once sync.Once
	done chan struct{}
}

func (b *meetLateBody) Read(p []byte) (int, error) {
	select {
	case <-time.After(time.Until(b.at)):
	case <-b.done:
		return 0, io.ErrClosedPipe
	}
	return b.rest.Read(p)
}

func (b *meetLateBody) Close() error { b.once.Do(func() { close(b.done) }); return nil }

// Pins: reading a failed body does not use up the retry's time in the line: the host's success lets it go.
func TestReadingAFailedBodyDoesNotCostTheRetryItsLine(t *testing.T) {
	for _, late := range []time.Duration{0, 45 * time.Millisecond} {
		t.Run(fmt.Sprintf("body after %v", late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					switch {
					case req.URL.Path == "/b": // in flight until 20 ms, then a success
						time.Sleep(20 * time.Millisecond)
					case req.URL.Path == "/c": // another request's failure: evidence
						return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
					case AttemptNumber(req.Context()) == 1:
						resp := testutil.Response(req, http.StatusServiceUnavailable, nil, "busy")
						resp.Body = &meetLateBody{at: time.Now().Add(late), rest: resp.Body, done: make(chan struct{})}
						return resp, nil
					}
					return testutil.Response(req, http.StatusOK, nil, "ok"), nil
				})
				tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 2, Backoff: Constant(30 * time.Millisecond)}}
				get := func(ctx context.Context, path string) (*http.Response, error) {
					req := testutil.NewRequest(t, http.MethodGet, "http://api.test"+path, nil)
					return testutil.RoundTrip(t, tr, req.WithContext(ctx))
				}
				start := time.Now()
				var wg sync.WaitGroup
				wg.Go(func() { get(t.Context(), "/b") })
				synctest.Wait() // b is in flight
				get(WithPolicy(t.Context(), Policy{MaxAttempts: 1}), "/c")
				resp, err := get(t.Context(), "/a") // waits in line: b in flight, c failed
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode, "the retry went (stop reason %v)", StopReason(resp))
				assert.Equal(t, 2, Attempts(resp))
				assert.Zero(t, tr.Stats().BudgetRefusals)
				if late == 0 {
					assert.EqualValues(t, 1, tr.Stats().BudgetWaits, "the retry waited in line, let go by b's success")
					assert.Equal(t, 30*time.Millisecond, time.Since(start), "its backoff, counted from its failure")
				}
				wg.Wait()
			})
		})
	}
}

// Pins: Retryable judges each outcome of a hedging as it arrives; the first it does not retry wins.
func TestRetryableJudgesEveryOutcomeOfAHedgedRequest(t *testing.T) {
	for _, hedge := range []int{http.StatusServiceUnavailable, http.StatusOK} {
		t.Run(fmt.Sprintf("the hedge's %d", hedge), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The first attempt: 200 at 30 ms; its hedge, sent at 10 ms: at 15 ms.
				base := &slowBase{latency: latencies(30*time.Millisecond, 5*time.Millisecond, 0)}
				base.status = func(n int) int { return map[int]int{1: 200, 2: hedge, 3: 200}[n] }
				tr := hedged(base, Hedge{After: 10 * time.Millisecond})
				var mu sync.Mutex
				var seen []int
				tr.Policy.Retryable = func(a *Attempt) bool {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, a.Number)
					return a.Retry || a.Number == 2 // the hedge's outcome is not good enough
				}
				resp, _ := getOK(t, tr)
				assert.Equal(t, []int{2, 1}, seen, "the attempts Retryable judged, in order of arrival")
				assert.Equal(t, 1, Attempts(resp), "the first attempt won")
				assert.Equal(t, 2, base.Attempts(), "no retry")
			})
		})
	}
}

// Pins: a race's retry waits at least every failed answer's wait (internal/sim seed 91037585, made exact).
func TestARacesRetryWaitsForEveryAnswersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		sent := map[int]time.Time{}
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			n := AttemptNumber(req.Context())
			mu.Lock()
			sent[n] = time.Now()
			mu.Unlock()
			switch n {
			case 1: // at 84 ms: 502, Retry-After: 1 (second)
				time.Sleep(84 * time.Millisecond)
				return testutil.Response(req, http.StatusBadGateway, http.Header{"Retry-After": {"1"}}, "1"), nil
			case 2: // sent at 1 ms: reset at 3 s, the race's last answer
				time.Sleep(time.Until(start.Add(3 * time.Second)))
				return nil, testutil.ErrReset()
			case 3: // sent at 2 ms: at 24 ms, 500, Retry-After: 2 s after the start (a date)
				time.Sleep(22 * time.Millisecond)
				date := start.Add(2 * time.Second).UTC().Format(http.TimeFormat)
				return testutil.Response(req, http.StatusInternalServerError, http.Header{"Retry-After": {date}}, "3"), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := hedged(base, Hedge{After: time.Millisecond, MaxHedges: 2, Fraction: 1})
		tr.Budget = UnlimitedBudget()
		tr.Policy.Backoff = Constant(10 * time.Millisecond)
		h := new(hookLog).watch(tr)
		resp, _ := getOK(t, tr)
		require.Equal(t, 4, Attempts(resp), "three raced, then the retry")
		mu.Lock()
		defer mu.Unlock()
		assert.GreaterOrEqual(t, sent[4].Sub(start), 4*time.Second,
			"the retry went %v after the race's end at 3 s; attempt 1 asked 1 s", sent[4].Sub(start)-3*time.Second)
		require.NotEmpty(t, h.retries)
		last := h.retries[len(h.retries)-1]
		assert.GreaterOrEqual(t, last.Delay, time.Second, "OnRetry's Delay after the race (set by %s)", last.Source)
	})
}
