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
			assert.True(t, b.wait(clock.Real{}, nil, "", t.Context(), budgetT0, false), "released at once")
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
	assert.Equal(t, 5, spend(z, budgetT0, 100), "and earns the default ratio: 10 x 0.55")
}

// ---- the Budget under a Transport, in fake time (see also budget_load_test.go) ----

// A retry that cannot be paid for waits in line, without a deadline, for
// up to maxLineWait while the host is heard of but never seen back (other
// requests' failures, every 50 ms, keep it from probing), then gives up with
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
		go func() { // other requests failing, every 50 ms
			for {
				select {
				case <-time.After(50 * time.Millisecond):
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

// A wait in line ends just before the caller's deadline, by a tenth of the
// time left when it began (at most a second): the caller gets the last
// failure, with ReasonBudget, rather than its deadline's error. (The retry
// is the last attempt of a request with a deadline: it does not probe.)
func TestBudgetWaitEndsBeforeTheDeadline(t *testing.T) {
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
		assert.Equal(t, ReasonBudget, e.Reason)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 450*time.Millisecond, time.Since(start))
	})
}

// A retry waiting in line goes as soon as a success elsewhere starts a
// recovery; its backoff counts from its failure, and has passed. (The
// retry is the last attempt of a request with a deadline: it does not
// probe.)
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
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a last attempt kept for the host
		defer cancel()
		start := time.Now()
		done := make(chan *http.Response)
		go func() {
			resp, err := tr.RoundTrip(newGet(t, ctx))
			assert.NoError(t, err)
			done <- resp
		}()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		up.Store(true)
		resp, err := tr.RoundTrip(newGet(t, t.Context())) // a success: the news
		require.NoError(t, err)
		resp.Body.Close()
		one := <-done
		require.NotNil(t, one)
		readBody(t, one)
		assert.Equal(t, http.StatusOK, one.StatusCode)
		assert.Equal(t, 200*time.Millisecond, time.Since(start), "let go at 200 ms, its 100 ms backoff spent in line")
		assert.Equal(t, 200*time.Millisecond, ev.BudgetWait)
		assert.Equal(t, 2, Attempts(one))
	})
}

// Transports that share a Budget share its lanes: a host that one of
// them saw fail holds the retries of the other; a Transport with a budget
// of its own (the default) knows nothing of it.
func TestBudgetSharedByTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := NewBudget(0, 1)
		p := Policy{MaxAttempts: 1}
		ta := &Transport{Base: &fakeBase{answer: statuses(503)}, Budget: shared, Policy: p}
		tb := &Transport{Base: &fakeBase{answer: statuses(200)}, Budget: shared, Policy: p}
		tc := &Transport{Base: &fakeBase{answer: statuses(200)}, Policy: p}
		budgetGet(t, ta)
		assert.False(t, tb.init2().retry("budget.test", time.Now()), "the shared budget saw the host fail")
		assert.True(t, tc.init2().retry("budget.test", time.Now()), "a budget of its own did not")
		budgetGet(t, tb) // a success through the other Transport
		assert.True(t, ta.init2().retry("budget.test", time.Now()), "the host is seen back for both")
	})
}

func TestEachTransportOwnsItsDefaultBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{MaxAttempts: 1}
		ta := &Transport{Base: &fakeBase{answer: statuses(503)}, Policy: p}
		tb := &Transport{Base: &fakeBase{answer: statuses(503)}, Policy: p}
		budgetGet(t, ta)
		assert.False(t, ta.init2().retry("budget.test", time.Now()), "the host failed for the first Transport's budget")
		assert.True(t, tb.init2().retry("budget.test", time.Now()), "the second Transport's budget is untouched")
		assert.NotSame(t, ta.init2(), tb.init2())
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
		send(ctx, http.MethodGet, blip)  // 2 attempts, 1 retry, after a wait in line
		send(ctx, http.MethodPost, down) // 1 attempt: not idempotent
		send(ctx, http.MethodGet, fault) // 1 attempt: not transient
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		send(short, http.MethodGet, down) // 1 attempt: the wait would pass the deadline
		cancel()
		send(ctx, http.MethodGet, down) // 3 attempts, 2 retries, each after a wait in line: exhausted
		// The same: each retry follows a failure of its host, and waits in
		// line for news of it (here a probe after 100 ms without news; a
		// request's last attempt probes after 2 s).
		send(ctx, http.MethodGet, down)

		assert.Equal(t, Stats{
			Requests:    7,
			Attempts:    12,
			Retries:     5,
			BudgetWaits: 5,
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

// The Logger hears that retries waited in line until their requests ended
// once per 10 s at warning level, not once per request.
func TestBudgetWarningIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		tr := &Transport{Base: &fakeBase{answer: statuses(503)}, Budget: NewBudget(0, 0), Logger: logger,
			Policy: Policy{MaxAttempts: 2, Backoff: Constant(0)}}
		for range 30 {
			// Each waits in line until just before its deadline, and gives up.
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

// Which failures make a host down for the budget: three answers in a row
// that are overload evidence (an error, a 503 without a wait, an answer
// saying X-Should-Retry: false or x-envoy-overloaded, even with a wait),
// but not a server's explicit wait (429 or 503 with Retry-After), on a
// retry or on a request's last attempt alike.
func TestWhatMakesAHostDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(int, *http.Request) (*http.Response, error)
		down   bool
	}{
		{"reset", resetByPeer, true},
		{"503", statuses(503), true},
		{"X-Should-Retry: false", withHeader(503, "X-Should-Retry", "false"), true},
		{"x-envoy-overloaded with a wait", withHeader(503, "Retry-After", "1", "X-Envoy-Overloaded", "true"), true},
		{"429 with Retry-After", withHeader(429, "Retry-After", "1"), false},
		{"503 with Retry-After", withHeader(503, "Retry-After", "1"), false},
	} {
		for _, attempts := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s, MaxAttempts %d", tc.name, attempts), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					tr := &Transport{Base: &fakeBase{answer: tc.answer}, Budget: NewBudget(0, 100),
						Policy: Policy{MaxAttempts: attempts, Backoff: Constant(0)}}
					for range 3 {
						budgetGet(t, tr)
					}
					assert.Equal(t, !tc.down, tr.init2().retry("budget.test", time.Now()),
						"a retry paid (not down) after three such answers")
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
		return response(req, status, h, ""), nil
	}
}

// A layer above that retries with the same key (an SDK's loop) gets its
// tries answered within the deadline: the first waits in line until just
// before it, and the later ones, known by their key, wait no longer than
// their backoff instead of each ending a tenth of what is left before the
// deadline, the last of them at or past it.
func TestAnOuterRetryDoesNotWaitInLineAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &fakeBase{answer: statuses(503)},
			Policy: Policy{Backoff: Constant(time.Millisecond)}}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
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
		assert.Equal(t, 90*time.Millisecond, ends[0], "the first try's line ends a tenth before the deadline")
		assert.Equal(t, []time.Duration{91 * time.Millisecond, 92 * time.Millisecond}, ends[1:],
			"each later try: one attempt, a backoff of 1 ms in line, and its last answer")
	})
}
