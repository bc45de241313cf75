package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// ---- the public Budget (its machinery is tested in internal/budget) ----

func TestNilAndUnlimitedBudgetsCountNothing(t *testing.T) {
	assert.Nil(t, (*Budget)(nil).machine())
	assert.Nil(t, UnlimitedBudget().machine())
	assert.NotNil(t, new(Budget).machine())
}

// The zero Budget's size is its machinery's zero value's: the documented
// defaults.
func TestBudgetDefaultsAreTheMachinerys(t *testing.T) {
	assert.EqualValues(t, 0.55, budget.DefaultRatio, "as NewBudget's doc says")
	assert.EqualValues(t, 10, budget.DefaultCredit, "as NewBudget's doc says")
	ratio, credit := NewBudget(0.1, 3).machine().Params()
	assert.Equal(t, 0.1, ratio)
	assert.Equal(t, 3, credit)
}

// ---- the Budget under a Transport, in fake time (see also budget_contract_test.go) ----

// inFlight holds a request to host open in tr until the returned function
// is called: another request in flight, whose news may come.
func inFlight(t *testing.T, tr *Transport, host string) (release func()) {
	t.Helper()
	tr.init()
	l := tr.accounts.Start(host)
	return l.End
}

// othersFail reports a failure of host by another request every gap until
// the returned function is called.
func othersFail(tr *Transport, host string, gap time.Duration) (stop func()) {
	tr.init()
	l := tr.accounts.Start(host)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var id uint64
		for {
			select {
			case <-time.After(gap):
				l.Failure(time.Now(), &id)
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		l.End()
	}
}

// A retry on evidence from other requests (another in flight, failing the
// host every 50 ms) waits in line, without a deadline, until its request's
// schedule ends (MaxAttempts 2, Constant(100ms): 100 ms after its
// failure), then gives up with ReasonBudget: the caller gets the last
// response, its body intact, and learns how long it waited.
func TestBudgetWaitEndsWithTheSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			return testutil.Response(req, http.StatusServiceUnavailable, nil, "come back later"), nil
		}}
		h := new(hookLog)
		tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 2, Backoff: Constant(100 * time.Millisecond)}}
		h.watch(tr)
		stop := othersFail(tr, "api.test", 50*time.Millisecond)
		defer stop()
		time.Sleep(51 * time.Millisecond) // the other's first failure comes first
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "come back later", testutil.ReadBody(t, resp))
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		require.Equal(t, []Reason{ReasonBudget}, h.reasons())
		assert.Same(t, resp, h.giveUps[0].Response)
		assert.Equal(t, 100*time.Millisecond, h.giveUps[0].BudgetWait)
		assert.Equal(t, 1, base.Attempts())
		assert.Zero(t, tr.Stats().BudgetWaits, "no retry let go")
		assert.EqualValues(t, 1, tr.Stats().BudgetRefusals)
	})
}

// A wait in line ends just before the caller's deadline, by a tenth of the
// time left when it began (at most a second), when that comes before its
// schedule ends (two retries 300 ms apart: at 600 ms): the caller gets the
// last failure, with ReasonBudget, rather than its deadline's error.
func TestBudgetWaitEndsBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &testutil.Base{Answer: testutil.Refused}, Budget: NewBudget(0, 0),
			Policy: Policy{MaxAttempts: 3, Backoff: Constant(300 * time.Millisecond)}}
		stop := othersFail(tr, "api.test", 20*time.Millisecond) // news, but never of a success
		defer stop()
		ctx := testutil.WithTimeout(t, 500*time.Millisecond)
		start := time.Now()
		_, err := tr.RoundTrip(testutil.Get(t, ctx))
		gaveUp(t, err, ReasonBudget, 0)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 450*time.Millisecond, time.Since(start))
	})
}

// untilUp answers 503 until up is true, then 200 "ok".
func untilUp(up *atomic.Bool) testutil.Answer {
	return func(_ int, req *http.Request) (*http.Response, error) {
		if up.Load() {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
	}
}

// A retry waiting in line (another request fails the host) goes as soon
// as a success elsewhere lets it go, paid by the credit; its backoff counts
// from its failure, and has passed. OnRetry tells the whole wait in Delay,
// and the part in line in BudgetWait.
func TestBudgetWaitEndsWithASuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var up atomic.Bool
		base := &testutil.Base{Answer: untilUp(&up)}
		var ev RetryEvent
		tr := &Transport{Base: base, Budget: NewBudget(0, 1), // its schedule: 300 ms
			Policy:  Policy{MaxAttempts: 4, Backoff: Constant(100 * time.Millisecond)},
			OnRetry: func(e *RetryEvent) { ev = *e }}
		stop := othersFail(tr, "api.test", 20*time.Millisecond) // news, but never of a success
		time.Sleep(21 * time.Millisecond)                       // another request failed the host
		start := time.Now()
		done := make(chan *http.Response)
		go func() {
			resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
			assert.NoError(t, err)
			done <- resp
		}()
		time.Sleep(200 * time.Millisecond)
		stop()
		up.Store(true)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context())) // a success: the news
		require.NoError(t, err)
		resp.Body.Close()
		one := <-done
		require.NotNil(t, one)
		testutil.ReadBody(t, one)
		assert.Equal(t, http.StatusOK, one.StatusCode)
		assert.Equal(t, 200*time.Millisecond, time.Since(start), "let go at 200 ms, its 100 ms backoff spent in line")
		assert.Equal(t, 200*time.Millisecond, ev.BudgetWait)
		assert.Equal(t, 200*time.Millisecond, ev.Delay, "the whole wait, the line's included")
		assert.Equal(t, 2, Attempts(one))
	})
}

// A retry the credit cannot pay for, with nothing else in flight to its
// host, is refused at once: the caller gets the failed response as it
// came, with ReasonBudget, and the Logger hears of it.
func TestBudgetRefusesAtOnceWithNoNewsComing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testutil.SyncBuffer
		h := new(hookLog)
		tr := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Budget: NewBudget(0, 0),
			Logger: slog.New(slog.NewTextHandler(&buf, nil))}
		h.watch(tr)
		start := time.Now()
		_, body := getOK(t, tr)
		assert.Equal(t, "attempt 1", body)
		assert.Zero(t, time.Since(start), "at once")
		assert.Equal(t, []Reason{ReasonBudget}, h.reasons())
		assert.EqualValues(t, 1, tr.Stats().BudgetRefusals)
		assert.Zero(t, tr.Stats().BudgetWaits)
		assert.Contains(t, buf.String(), "retryhttp: retries refused: the budget's credit for the host is spent")
	})
}

// Transports that share a Budget share its hosts' credit; a Transport with
// a budget of its own (the default) knows nothing of it.
func TestBudgetSharedByTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := NewBudget(0, 1)
		p := Policy{MaxAttempts: 2, Backoff: Constant(0)}
		ta := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Budget: shared, Policy: p}
		tb := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Budget: shared, Policy: p}
		tc := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Policy: p}
		assert.Equal(t, 2, budgetGet(t, ta), "the shared credit pays")
		assert.Equal(t, 1, budgetGet(t, tb), "spent by the other Transport")
		assert.Equal(t, 2, budgetGet(t, tc), "a budget of its own")
	})
}

// budgetGet sends one GET through rt, closes the response, if any, and
// returns the attempts it made.
func budgetGet(t *testing.T, rt http.RoundTripper) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://budget.test/", nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	var e *Error
	switch {
	case err == nil:
		resp.Body.Close()
		return Attempts(resp)
	case errors.As(err, &e):
		return e.Attempts
	}
	return 0
}

// BenchmarkBudget measures what a request that needs no retry costs the
// budget, from parallel goroutines: its host's account found, its success
// reported.
func BenchmarkBudget(b *testing.B) {
	bg := new(Budget)
	tr := &Transport{Budget: bg}
	tr.init()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l := bg.machine().Start("api.test:443")
			l.Success(tr.clock, false)
			l.End()
		}
	})
}

// The Logger hears that retries waited in line until their requests ended
// once per 10 s at warning level, not once per request.
func TestBudgetWarningIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf testutil.SyncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		tr := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Budget: NewBudget(0, 0), Logger: logger,
			Policy: Policy{MaxAttempts: 3, Backoff: Constant(300 * time.Millisecond)}}
		stop := othersFail(tr, "budget.test", 20*time.Millisecond)
		defer stop()
		for range 30 {
			// Each waits in line until just before its deadline (its
			// schedule ends later, at 600 ms), and gives up.
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://budget.test/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			cancel()
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the last answer")
			resp.Body.Close()
			time.Sleep(550 * time.Millisecond) // a request a second: each ends at 450 ms
		}
		warnings := strings.Count(buf.String(), "retries wait in line for a host that does not answer")
		assert.Equal(t, 3, warnings, "30 requests over 30 s: one warning per 10 s\n%s", buf.String())
		assert.Contains(t, buf.String(), "retryhttp.budget_waits=0 retryhttp.budget_denied=20")
		assert.Zero(t, tr.Stats().BudgetWaits, "no retry let go")
		assert.EqualValues(t, 30, tr.Stats().BudgetRefusals)
	})
}

// A dead host's retries wait in a line of their own, and spend a credit of
// their own: through one default Transport, a host that answers 503 to
// everything at 100 requests a second does not keep the retries of a
// healthy host, whose every tenth request fails once, from going (before
// the fix, a healthy host's failure waited behind the dead host's line and
// gave up).
func TestADeadHostDoesNotHoldUpAHealthyHostsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{} // attempts per healthy request
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			status := http.StatusServiceUnavailable
			if req.URL.Host == "ok.test" {
				mu.Lock()
				seen[req.URL.Path]++
				n := seen[req.URL.Path]
				mu.Unlock()
				if n > 1 || !strings.HasSuffix(req.URL.Path, "0") {
					status = http.StatusOK
				}
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
		})
		tr := &Transport{Base: base}
		var wg sync.WaitGroup
		served := 0
		for i := range 500 { // 5 s of the dead host at 100/s
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 10 * time.Millisecond)
				resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://down.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		for i := range 50 { // and the healthy one at 10/s
			wg.Go(func() {
				time.Sleep(time.Duration(i)*100*time.Millisecond + 5*time.Millisecond)
				resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, fmt.Sprintf("http://ok.test/%d", i), nil))
				if assert.NoError(t, err) {
					resp.Body.Close()
					mu.Lock()
					if resp.StatusCode == http.StatusOK {
						served++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		assert.Equal(t, 50, served, "every request to the healthy host served")
		for i := 0; i < 50; i += 10 {
			assert.Equal(t, 2, seen[fmt.Sprintf("/%d", i)], "request %d failed once and was retried", i)
		}
		assert.Positive(t, tr.Stats().BudgetRefusals, "the dead host's retries were refused")
	})
}

// What is a failure for the budget, evidence against a host: an answer
// that is overload evidence (an error, a 503 without a wait, an answer
// saying X-Should-Retry: false or x-envoy-overloaded, even with a wait, a
// wait of 0), but not a server's explicit wait (429 or 503 with
// Retry-After), on a retry or on a request's last attempt alike.
func TestWhatIsAFailureOfAHost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(int, *http.Request) (*http.Response, error)
		failure bool
	}{
		{"reset", testutil.ResetByPeer, true},
		{"503", testutil.Statuses(503), true},
		{"X-Should-Retry: false", withHeader(503, "X-Should-Retry", "false"), true},
		{"x-envoy-overloaded with a wait", withHeader(503, "Retry-After", "1", "X-Envoy-Overloaded", "true"), true},
		{"429 with Retry-After", withHeader(429, "Retry-After", "1"), false},
		{"503 with Retry-After", withHeader(503, "Retry-After", "1"), false},
		{"503 with Retry-After: 0", withHeader(503, "Retry-After", "0"), true},
	} {
		for _, attempts := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s, MaxAttempts %d", tc.name, attempts), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tr := &Transport{Base: &testutil.Base{Answer: tc.answer}, Budget: NewBudget(0, 100),
						Policy: Policy{MaxAttempts: attempts, Backoff: Constant(0), MaxRetryAfter: time.Hour}}
					budgetGet(t, tr)
					mine := inFlight(t, tr, "budget.test")
					defer mine()
					l := tr.accounts.Start("budget.test")
					defer l.End()
					var id uint64
					l.Failure(time.Now(), &id)
					want := budget.Go
					if tc.failure {
						want = budget.Wait
					}
					assert.Equal(t, want, l.Retry(time.Now(), id), "evidence from the other request's failure")
				})
			})
		}
	}
}

// withHeader answers status with the header fields kv (name, value, ...).
func withHeader(status int, kv ...string) func(int, *http.Request) (*http.Response, error) {
	return func(_ int, req *http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return testutil.Response(req, status, h, ""), nil
	}
}

// A layer above that retries with the same key (an SDK's loop) gets the
// attempts its request has left, at their backoff: its tries are answered
// long before the deadline, and add up to the policy's attempts.
func TestAnOuterRetryGetsTheAttemptsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(time.Millisecond)}}
		ctx := testutil.WithTimeout(t, 100*time.Millisecond)
		start := time.Now()
		var ends []time.Duration
		for range 3 { // the SDK's tries, one key, no pause between them
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/charges", strings.NewReader("a=1"))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "charge-1")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err, "the last answer, not the deadline's error")
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			resp.Body.Close()
			ends = append(ends, time.Since(start))
		}
		assert.Equal(t, []time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}, ends,
			"the first try makes the policy's 4 attempts, 1 ms apart; the later ones one each")
		assert.Equal(t, 6, base.Attempts())
	})
}

// A Budget shared by Transports used in two testing/synctest bubbles, one
// after the other, works in both: each retry in line waits on its own
// bubble's clock (before the fix, the second bubble's retries hung on the
// first bubble's timer).
func TestBudgetSharedAcrossBubbles(t *testing.T) {
	shared := NewBudget(0, 0)
	for i := range 2 {
		t.Run(fmt.Sprintf("bubble %d", i+1), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var up atomic.Bool
				base := &testutil.Base{Answer: untilUp(&up)}
				// A probe goes 100 ms after the last news (the retry's
				// backoff; the jitter fixed at none), which in the second
				// bubble may be the first's (each bubble's clock starts at
				// the same instant): inside its schedule, 10 retries of
				// 100 ms.
				tr := &Transport{Base: base, Budget: shared, rand: func() float64 { return 0 },
					Policy: Policy{MaxAttempts: 11, Backoff: Constant(100 * time.Millisecond)}}
				release := inFlight(t, tr, "api.test") // news may come: the retry waits
				time.AfterFunc(50*time.Millisecond, func() { up.Store(true) })
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				release()
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp), "let go by a probe once the host is back")
			})
		})
	}
}

// A retry the server timed (Retry-After: 1) is its pacing: with no credit
// and another request to the host in flight, it still goes at the server's
// wait (1 s and its jitter of 99 ms), waits in no line, and spends nothing.
func TestARetryTheServerTimedSkipsTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := new(hookLog)
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}})}
		tr := &Transport{Base: base, Budget: NewBudget(0, 0), rand: func() float64 { return 0.99 }}
		h.watch(tr)
		release := inFlight(t, tr, "api.test")
		defer release()
		stop := othersFail(tr, "api.test", 20*time.Millisecond)
		defer stop()
		time.Sleep(21 * time.Millisecond) // another request failed the host
		start := time.Now()
		resp, body := getOK(t, tr)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "ok", body)
		assert.Equal(t, 1099*time.Millisecond, time.Since(start), "at the server's wait")
		assert.Empty(t, h.reasons())
		require.Len(t, h.retries, 1)
		assert.Zero(t, h.retries[0].BudgetWait, "in no line")
		assert.Equal(t, Stats{Requests: 1, Attempts: 2, Retries: 1, GiveUps: map[Reason]uint64{}}, tr.Stats())
	})
}

// A paced retry spends no credit: a host whose every request is answered
// 429 once, Retry-After: 1, keeps a credit of one whole, however many
// such retries it serves.
func TestAPacedRetrySpendsNoCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 1) // one retry, earned back by nothing but the refill
		tr := &Transport{Base: &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if Attempts(&http.Response{Request: req}) == 1 {
				return testutil.Response(req, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, ""), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}, Budget: b}
		for range 20 {
			resp, _ := getOK(t, tr)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}
		l := b.machine().Start("api.test")
		defer l.End()
		assert.True(t, l.Spend(time.Now()), "the credit whole")
	})
}

// With MaxAttempts math.MaxInt, a retry that waits for the budget (here it
// has no credit, and another request to its host is in flight) sizes what
// is left of the request's schedule with a few Backoff calls, not one for
// each attempt left: the request ends with the caller's context (or just before
// its deadline, when the next wait would pass it), with a deadline or
// without one.
func TestHugeMaxAttemptsWaitsForTheBudgetWithFewBackoffCalls(t *testing.T) {
	for _, deadline := range []bool{true, false} {
		name := map[bool]string{true: "deadline", false: "canceled"}[deadline]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int64
				backoff := testutil.BackoffFunc(func(int, time.Duration, float64) time.Duration {
					if n := calls.Add(1); n > 100_000 { // a call for each attempt left would never end
						t.Fatalf("the Backoff was asked %d times", n)
					}
					return 100 * time.Millisecond
				})
				answer := func(n int, req *http.Request) (*http.Response, error) {
					if req.URL.Path == "/held" {
						<-req.Context().Done()
						return nil, req.Context().Err()
					}
					return testutil.ResetByPeer(n, req)
				}
				tr := &Transport{Base: &testutil.Base{Answer: answer}, Budget: NewBudget(0, 0),
					Policy: Policy{MaxAttempts: math.MaxInt, Backoff: backoff}, rand: func() float64 { return 0 }}
				held, release := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				wg.Go(func() {
					tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://api.test/held", nil).WithContext(held))
				})
				defer wg.Wait()
				defer release()
				synctest.Wait() // the other request is in flight
				ctx, cancel := context.WithCancel(t.Context())
				if deadline {
					ctx, cancel = context.WithTimeout(t.Context(), time.Second)
				} else {
					time.AfterFunc(time.Second, cancel)
				}
				defer cancel()
				start := time.Now()

				resp, err := tr.RoundTrip(testutil.Get(t, ctx))

				assert.Nil(t, resp)
				require.Error(t, err)
				if deadline {
					assert.LessOrEqual(t, time.Since(start), time.Second)
					assert.Greater(t, time.Since(start), 800*time.Millisecond)
				} else {
					assert.Equal(t, time.Second, time.Since(start))
				}
				// Each retry sizes what is left of the schedule when it waits
				// in line, and when an earlier wait in line took its slack:
				// at most scheduleCalls Backoff calls each, besides its own.
				perRetry := float64(calls.Load()) / float64(tr.Stats().Retries+1)
				assert.LessOrEqual(t, perRetry, float64(2*scheduleCalls+2), "Backoff calls per retry")
				assert.Positive(t, tr.Stats().BudgetWaits)
			})
		})
	}
}

// A retry the budget granted but the caller canceled during its wait was
// never sent: the budget takes it back.
func TestCanceledWaitGivesTheRetryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 1) // one retry, never earned back
		base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK)}
		tr, _ := fakeTransport(base, Policy{Backoff: Constant(time.Second)}, 0)
		tr.Budget = b

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel) // during the first wait
		_, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.ErrorIs(t, err, context.Canceled)

		resp, _ := getOK(t, tr)
		assert.Equal(t, 2, Attempts(resp), "the one retry is still there")
	})
}

// After a retry waited in the budget's line, the next retry's Backoff gets
// as prev the wait made, as OnRetry's Delay tells it, not its own draw:
// the first retry draws 30 ms (of at most 200 ms), waits in line (no
// credit, another request in flight) until the probe lets it go at 200 ms,
// and so waited 200 ms. (The schedule asks the Backoff too, for its
// longest waits.)
func TestBackoffGetsTheWaitMadeAsPrev(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var prevs []time.Duration
		backoff := testutil.BackoffFunc(func(_ int, prev time.Duration, u float64) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if u > 0 { // the largest sample: the schedule asks for the longest wait
				return 200 * time.Millisecond
			}
			prevs = append(prevs, prev) // a draw, of the Transport's rand
			return 30 * time.Millisecond
		})
		var delays []time.Duration
		tr := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503, 503, 200)}, Budget: NewBudget(0, 0),
			Policy:  Policy{MaxAttempts: 5, Backoff: backoff},
			OnRetry: func(e *RetryEvent) { delays = append(delays, e.Delay) },
			rand:    func() float64 { return 0 }}
		release := inFlight(t, tr, "api.test")
		defer release()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		resp.Body.Close()
		require.NotEmpty(t, delays)
		assert.Equal(t, 200*time.Millisecond, delays[0], "let go by the probe after its longest backoff, 200 ms")
		require.GreaterOrEqual(t, len(prevs), 2)
		assert.Equal(t, []time.Duration{0, delays[0]}, prevs[:2], "prev: 0 before the first retry, then the wait made")
	})
}
