package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/budget"
)

// ---- the public Budget (its machinery is tested in internal/budget) ----

var budgetT0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// spend asks b for retries at now until it refuses one (or limit were
// granted) and returns how many it granted.
func spend(b *Budget, now time.Time, limit int) int {
	n := 0
	for n < limit && b.retry("", now) {
		n++
	}
	return n
}

func TestNilAndUnlimitedBudgetsAllowEveryRetry(t *testing.T) {
	for name, b := range map[string]*Budget{"nil": nil, "unlimited": UnlimitedBudget()} {
		t.Run(name, func(t *testing.T) {
			b.failure("", budgetT0)
			b.succeeded(clock.Real{}, "", 1)
			b.refund()
			assert.Equal(t, 100_000, spend(b, budgetT0, 100_000))
			assert.True(t, b.wait(clock.Real{}, "", t.Context(), budgetT0, false), "released at once")
			assert.Nil(t, b.machine(), "no machinery: nothing is counted")
		})
	}
}

// The zero Budget's size is its machinery's zero value's: the documented
// defaults.
func TestBudgetDefaultsAreTheMachinerys(t *testing.T) {
	assert.EqualValues(t, DefaultBudgetRatio, budget.DefaultRatio)
	assert.EqualValues(t, DefaultBudgetCredit, budget.DefaultCredit)
}

func TestNewBudgetArguments(t *testing.T) {
	b := NewBudget(-1, -5)
	assert.Equal(t, 0, spend(b, budgetT0, 100), "no credit")
	b = NewBudget(-1, 1)
	assert.Equal(t, 1, spend(b, budgetT0, 100))
	for range 100 {
		b.succeeded(clock.Real{}, "", 1)
	}
	assert.Equal(t, 0, spend(b, budgetT0, 100), "a negative ratio earns nothing")
	assert.Equal(t, 10, spend(new(Budget), budgetT0, 100), "the zero Budget holds the default credit")
	z := new(Budget)
	spend(z, budgetT0, 100)
	for range 10 {
		z.succeeded(clock.Real{}, "", 1)
	}
	assert.Equal(t, int(10*DefaultBudgetRatio), spend(z, budgetT0, 100), "and earns the default ratio")
}

// ---- the Budget under a Transport, in fake time (see also budget_load_test.go) ----

// A retry that cannot be paid for waits in line, without a deadline, for
// up to maxLineWait while the host is heard of but never seen back (other
// requests' failures keep it from probing), then gives up with
// ReasonBudget: the caller gets the last response, its body intact, and
// learns how long it waited.
func TestBudgetWaitEndsAtTheHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(_ int, req *http.Request) (*http.Response, error) {
			return response(req, http.StatusServiceUnavailable, nil, "come back later"), nil
		}}
		var events []GiveUpEvent
		tr := &Transport{
			Base:     base,
			Budget:   NewBudget(0, 0),
			Policy:   Policy{MaxAttempts: 2, Backoff: Constant(100 * time.Millisecond)},
			OnGiveUp: func(e *GiveUpEvent) { events = append(events, *e) },
		}
		b := tr.init2()
		stop := make(chan struct{})
		defer close(stop)
		go func() { // other requests failing, every 500 ms
			for {
				select {
				case <-time.After(500 * time.Millisecond):
					b.failure("api.test", time.Now())
				case <-stop:
					return
				}
			}
		}()
		start := time.Now()
		resp, err := tr.RoundTrip(newGet(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "come back later", readBody(t, resp))
		assert.Equal(t, maxLineWait, time.Since(start))
		require.Len(t, events, 1)
		assert.Equal(t, ReasonBudget, events[0].Reason)
		assert.Same(t, resp, events[0].Response)
		assert.Equal(t, maxLineWait, events[0].BudgetWait)
		assert.Equal(t, 1, base.attempts())
		assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
		assert.EqualValues(t, 1, tr.Stats().BudgetDenied)
	})
}

// The caller's deadline ends a wait in line too, with the deadline's reason.
// (The retry is the request's last attempt: it does not probe.)
func TestBudgetWaitEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &fakeBase{answer: refused}, Budget: NewBudget(0, 1),
			Policy: Policy{MaxAttempts: 2, Backoff: Constant(300 * time.Millisecond)}}
		tr.init2().retry("", time.Now())
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := tr.RoundTrip(newGet(t, ctx))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonDeadline, e.Reason)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
	})
}

// A retry waiting in line goes as soon as a success elsewhere starts a
// recovery, and then waits its own backoff. (The retry is the request's
// last attempt: it does not probe.)
func TestBudgetWaitEndsWithASuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var up atomic.Bool
		base := &fakeBase{answer: func(_ int, req *http.Request) (*http.Response, error) {
			if up.Load() {
				return response(req, http.StatusOK, nil, "ok"), nil
			}
			return response(req, http.StatusServiceUnavailable, nil, ""), nil
		}}
		var ev RetryEvent
		tr := &Transport{Base: base, Budget: NewBudget(0, 1),
			Policy:  Policy{MaxAttempts: 2, Backoff: Constant(100 * time.Millisecond)},
			OnRetry: func(e *RetryEvent) { ev = *e }}
		tr.init2().retry("", time.Now())
		done := make(chan loadOutcome)
		go func() { done <- burst(tr, 1, 0)[0] }()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		up.Store(true)
		burst(tr, 1, 0) // a success: the news
		one := <-done
		require.NoError(t, one.err)
		assert.Equal(t, http.StatusOK, one.status)
		assert.Equal(t, 300*time.Millisecond, one.held, "let go at 200 ms, then its own 100 ms backoff")
		assert.Equal(t, 200*time.Millisecond, ev.BudgetWait)
		assert.Equal(t, 2, one.attempts)
	})
}

func TestBudgetSharedByTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := NewBudget(0, 1)
		a, b := &fakeBase{answer: statuses(503)}, &fakeBase{answer: statuses(503)}
		p := Policy{MaxAttempts: 2, Backoff: Constant(0)}
		ta := &Transport{Base: a, Budget: shared, Policy: p}
		tb := &Transport{Base: b, Budget: shared, Policy: p}
		budgetGet(t, ta)
		budgetGet(t, tb)
		assert.Equal(t, 2, a.attempts(), "the first Transport took the retry")
		assert.Zero(t, ta.Stats().BudgetWaits)
		assert.EqualValues(t, 1, tb.Stats().BudgetWaits, "none left for the second: its retry waited")
	})
}

func TestEachTransportOwnsItsDefaultBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeBase{answer: statuses(503)}, &fakeBase{answer: statuses(503)}
		p := Policy{MaxAttempts: 2, Backoff: Constant(0)}
		ta := &Transport{Base: a, Policy: p}
		tb := &Transport{Base: b, Policy: p}
		for range 20 {
			budgetGet(t, ta)
		}
		assert.Positive(t, ta.Stats().BudgetWaits, "the host is down for the first Transport's budget")
		budgetGet(t, tb)
		assert.Equal(t, 2, b.attempts(), "the second Transport's budget is untouched")
		assert.Zero(t, tb.Stats().BudgetWaits)
	})
}

// budgetGet sends one GET through rt and closes the response, if any.
func budgetGet(t *testing.T, rt http.RoundTripper) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://budget.test/", nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
}

// TestStatsCountWhatHappened sends one request of each kind and reads the
// counters: logical requests, attempts, retries, budget waits and denials,
// and give-ups by reason.
func TestStatsCountWhatHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The base's answer to each request is set by the one sent before it.
		const (
			up    = iota // 200 to every attempt
			down         // 503 to every attempt
			blip         // 503 to a request's first attempt, 200 to its retries
			fault        // a non-transient error
		)
		var mode, host int
		base := &fakeBase{answer: func(_ int, req *http.Request) (*http.Response, error) {
			switch {
			case mode == fault:
				return nil, errors.New("not a transient failure")
			case mode == down, mode == blip && Attempts(&http.Response{Request: req}) == 1:
				return response(req, http.StatusServiceUnavailable, nil, ""), nil
			}
			return response(req, http.StatusOK, nil, ""), nil
		}}
		tr := &Transport{
			Base:   base,
			Budget: NewBudget(0, 3), // three retries, never earned back
			Policy: Policy{MaxAttempts: 3, Backoff: Constant(time.Second)},
		}
		send := func(ctx context.Context, method string, m int) {
			t.Helper()
			mode = m
			host++ // a host each: no run of failures makes one down
			req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://stats%d.test/", host), nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}
		ctx := context.Background()
		assert.Equal(t, Stats{GiveUps: map[Reason]uint64{}}, tr.Stats(), "zero before first use")

		send(ctx, http.MethodGet, up)    // 1 attempt
		send(ctx, http.MethodGet, blip)  // 2 attempts, 1 retry
		send(ctx, http.MethodPost, down) // 1 attempt: not idempotent
		send(ctx, http.MethodGet, fault) // 1 attempt: not transient
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		send(short, http.MethodGet, down) // 1 attempt: the wait would pass the deadline
		cancel()
		send(ctx, http.MethodGet, down) // 3 attempts, 2 retries: exhausted
		// The budget's 3 retries are spent: the retry waits in line; after
		// 100 ms without news it goes as a probe and fails; the next retry,
		// the request's last attempt, waits again, probes after 2 s of
		// silence, and fails: 3 attempts.
		send(ctx, http.MethodGet, down)

		assert.Equal(t, Stats{
			Requests:    7,
			Attempts:    12,
			Retries:     5,
			BudgetWaits: 2,
			GiveUps: map[Reason]uint64{
				ReasonNotIdempotent: 1,
				ReasonNotTransient:  1,
				ReasonDeadline:      1,
				ReasonExhausted:     2,
			},
		}, tr.Stats())
		assert.Equal(t, 12, base.attempts())
	})
}

// init2 initializes tr and returns its budget.
func (t *Transport) init2() *Budget {
	t.init()
	return t.budget
}

// BenchmarkBudget measures the budget's request-path operations from
// parallel goroutines: a success (what every request that needs no retry
// reports), a granted retry and a refused one.
func BenchmarkBudget(b *testing.B) {
	now := time.Now()
	run := func(b *testing.B, bg *Budget, op func(*Budget)) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(bg)
			}
		})
	}
	b.Run("success", func(b *testing.B) {
		run(b, new(Budget), func(bg *Budget) { bg.succeeded(clock.Real{}, "", 1) })
	})
	b.Run("retry/granted", func(b *testing.B) {
		run(b, new(Budget), func(bg *Budget) {
			bg.retry("", now)
			bg.refund()
		})
	})
	b.Run("retry/refused", func(b *testing.B) {
		run(b, NewBudget(0, 1), func(bg *Budget) { bg.retry("", now) })
	})
}

// The Logger hears that retries wait for the budget once per 10 s at
// warning level, not once per request.
func TestBudgetWarningIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		tr := &Transport{Base: &fakeBase{answer: statuses(503)}, Budget: NewBudget(0, 0), Logger: logger,
			Policy: Policy{MaxAttempts: 2, Backoff: Constant(0)}}
		for range 30 {
			// Each waits in line until its deadline, and gives up.
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://budget.test/", nil)
			require.NoError(t, err)
			_, err = tr.RoundTrip(req)
			cancel()
			require.Error(t, err)
			time.Sleep(500 * time.Millisecond)
		}
		warnings := strings.Count(buf.String(), "retry budget spent")
		assert.Equal(t, 3, warnings, "30 requests over 30 s: one warning per 10 s\n%s", buf.String())
		assert.Contains(t, buf.String(), "retryhttp.budget_waits=21")
		assert.EqualValues(t, 30, tr.Stats().BudgetWaits)
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A dead host's retries wait in a line of their own: through one default
// Transport, a host that answers 503 to everything at 100 requests a second
// does not keep the retries of a healthy host, whose every tenth request
// fails once, from going (issue 21: a healthy host's failure waited behind
// the dead host's line and gave up).
func TestADeadHostDoesNotHoldUpAHealthyHostsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{} // attempts per healthy request
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
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
				resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://down.test/", nil))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		for i := range 50 { // and the healthy one at 10/s
			wg.Go(func() {
				time.Sleep(time.Duration(i)*100*time.Millisecond + 5*time.Millisecond)
				resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, fmt.Sprintf("http://ok.test/%d", i), nil))
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
		assert.Positive(t, tr.Stats().BudgetWaits, "the dead host's retries waited")
	})
}
