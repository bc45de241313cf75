package retryhttp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// budgetT0 is the start of a one-second slice, so the windows of the tests
// below begin exactly at it.
var budgetT0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// at returns budgetT0 plus d.
func at(d time.Duration) time.Time { return budgetT0.Add(d) }

// spend asks b for retries at now until it refuses one (or limit were
// granted) and returns how many it granted.
func spend(b *Budget, now time.Time, limit int) int {
	n := 0
	for n < limit && b.Retry(now) {
		n++
	}
	return n
}

func deposit(b *Budget, now time.Time, requests int) {
	for range requests {
		b.Request(now)
	}
}

func TestBudgetFloorLetsAQuietClientRetry(t *testing.T) {
	b := NewBudget(DefaultBudgetRatio, DefaultBudgetMinPerSec, DefaultBudgetWindow)
	// No request yet: the floor alone, 10 retries per second of a 10 s window.
	assert.Equal(t, 100, spend(b, budgetT0, 1000))
}

func TestBudgetRatioOfRequests(t *testing.T) {
	b := NewBudget(0.2, 0, 10*time.Second)
	assert.Equal(t, 0, spend(b, budgetT0, 1000), "no requests, no floor: no retries")

	deposit(b, budgetT0, 50)
	assert.Equal(t, 10, spend(b, budgetT0, 1000), "20 % of 50 requests")

	deposit(b, budgetT0, 4)
	assert.Equal(t, 0, spend(b, budgetT0, 1000), "4 more requests earn 0.8 of a retry")
	deposit(b, budgetT0, 1)
	assert.Equal(t, 1, spend(b, budgetT0, 1000), "the fifth earns the whole retry")
}

func TestBudgetRatioPlusFloor(t *testing.T) {
	b := NewBudget(DefaultBudgetRatio, DefaultBudgetMinPerSec, DefaultBudgetWindow)
	deposit(b, budgetT0, 1000)
	assert.Equal(t, 200+100, spend(b, budgetT0, 10_000))
}

func TestBudgetDeniedRetriesCostNothing(t *testing.T) {
	b := NewBudget(0.5, 0, 10*time.Second)
	deposit(b, budgetT0, 4)
	require.Equal(t, 2, spend(b, budgetT0, 100))
	for range 1000 {
		require.False(t, b.Retry(budgetT0))
	}
	deposit(b, budgetT0, 2)
	assert.Equal(t, 1, spend(b, budgetT0, 100), "a thousand refusals left no trace")
}

func TestBudgetWindowSlides(t *testing.T) {
	t.Run("spent retries stop counting after one window", func(t *testing.T) {
		b := NewBudget(0, 1, 10*time.Second) // a floor of 10 per window
		require.Equal(t, 10, spend(b, at(0), 100))
		assert.Equal(t, 0, spend(b, at(10*time.Second-time.Nanosecond), 100), "still inside the window")
		assert.Equal(t, 10, spend(b, at(10*time.Second), 100), "the slice that spent them left the window")
	})
	t.Run("old requests stop earning retries", func(t *testing.T) {
		b := NewBudget(0.5, 0, 10*time.Second)
		deposit(b, at(0), 10)
		require.Equal(t, 5, spend(b, at(9*time.Second), 100))
		deposit(b, at(10*time.Second), 2)
		// Window [1 s, 11 s): the 10 requests of slice 0 are gone; the 5
		// retries of slice 9 remain, and the 2 new requests earn one.
		assert.Equal(t, 0, spend(b, at(10*time.Second), 100))
		deposit(b, at(18*time.Second), 10)
		// Window [9 s, 19 s): 12 requests earn 6, 5 spent.
		assert.Equal(t, 1, spend(b, at(18*time.Second), 100))
		// Window [10 s, 20 s): the 5 retries of slice 9 left it.
		assert.Equal(t, 5, spend(b, at(19*time.Second), 100))
	})
	t.Run("a window of slices far in the past is forgotten", func(t *testing.T) {
		b := NewBudget(0, 1, 10*time.Second)
		require.Equal(t, 10, spend(b, at(0), 100))
		// Same bucket indexes, a thousand windows later.
		assert.Equal(t, 10, spend(b, at(10_000*time.Second), 100))
	})
}

func TestBudgetRecoversSliceBySlice(t *testing.T) {
	b := NewBudget(0, 1, 10*time.Second) // 10 retries per 10 s window
	for s := range 10 {
		require.Equal(t, 1, spend(b, at(time.Duration(s)*time.Second), 1), "second %d", s)
	}
	assert.Equal(t, 0, spend(b, at(9500*time.Millisecond), 100), "all 10 spent")
	assert.Equal(t, 1, spend(b, at(10*time.Second), 100), "second 0 left the window")
	assert.Equal(t, 2, spend(b, at(12*time.Second), 100), "seconds 1 and 2 left it")
	assert.Equal(t, 10, spend(b, at(22*time.Second), 100), "a whole window later, all of it")
}

func TestNilAndUnlimitedBudgetsAllowEveryRetry(t *testing.T) {
	for name, b := range map[string]*Budget{"nil": nil, "unlimited": UnlimitedBudget()} {
		t.Run(name, func(t *testing.T) {
			b.Request(budgetT0)
			assert.Equal(t, 100_000, spend(b, budgetT0, 100_000))
		})
	}
}

func TestNewBudgetArguments(t *testing.T) {
	t.Run("zero window means the default", func(t *testing.T) {
		b := NewBudget(0, 1, 0)
		assert.Equal(t, 10, spend(b, at(0), 100))
		assert.Equal(t, 0, spend(b, at(DefaultBudgetWindow-time.Nanosecond), 100))
		assert.Equal(t, 10, spend(b, at(DefaultBudgetWindow), 100))
	})
	t.Run("negative ratio and floor count as zero", func(t *testing.T) {
		b := NewBudget(-1, -5, time.Second)
		deposit(b, budgetT0, 100)
		assert.Equal(t, 0, spend(b, budgetT0, 100))
	})
	t.Run("NaN counts as zero", func(t *testing.T) {
		b := NewBudget(math.NaN(), math.NaN(), time.Second)
		deposit(b, budgetT0, 100)
		assert.Equal(t, 0, spend(b, budgetT0, 100))
	})
	t.Run("an infinite ratio allows every retry", func(t *testing.T) {
		b := NewBudget(math.Inf(1), 0, time.Second)
		deposit(b, budgetT0, 1000)
		assert.Equal(t, 10_000, spend(b, budgetT0, 10_000))
	})
	t.Run("an infinite floor allows every retry", func(t *testing.T) {
		b := NewBudget(0.2, math.Inf(1), time.Second)
		deposit(b, budgetT0, 1000)
		assert.Equal(t, 10_000, spend(b, budgetT0, 10_000))
	})
	t.Run("a short window", func(t *testing.T) {
		b := NewBudget(0, 1000, 10*time.Millisecond) // 10 retries per 10 ms
		require.Equal(t, 10, spend(b, budgetT0, 100))
		assert.Equal(t, 0, spend(b, budgetT0.Add(9*time.Millisecond), 100))
		assert.Equal(t, 10, spend(b, budgetT0.Add(10*time.Millisecond), 100))
	})
}

// TestBudgetConcurrentRetriesNeverExceedTheAllowance has many goroutines
// race for a budget at one instant; the retries granted, counted one by
// one, never exceed what the budget allows, and the budget's own count
// agrees with them (every refusal was rolled back).
func TestBudgetConcurrentRetriesNeverExceedTheAllowance(t *testing.T) {
	const goroutines, calls = 64, 100
	t.Run("fixed requests", func(t *testing.T) {
		b := NewBudget(DefaultBudgetRatio, DefaultBudgetMinPerSec, DefaultBudgetWindow)
		deposit(b, budgetT0, 1000)
		const allowance = 300
		var granted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{}) // all goroutines race from the same moment
		for range goroutines {
			wg.Go(func() {
				<-start
				for range calls {
					if b.Retry(budgetT0) {
						granted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		got := int(granted.Load())
		assert.LessOrEqual(t, got, allowance)
		assert.Equal(t, allowance, got+spend(b, budgetT0, 10_000), "the budget counted exactly the granted retries")
	})
	t.Run("many races at the edge of the allowance", func(t *testing.T) {
		// The allowance is overrun, if ever, when goroutines ask for the
		// last retries at once: race for them many times over.
		for round := range 300 {
			b := NewBudget(0, 1, 10*time.Second) // 10 retries
			var granted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 8 {
				wg.Go(func() {
					<-start
					for range 3 {
						if b.Retry(budgetT0) {
							granted.Add(1)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			got := int(granted.Load())
			require.LessOrEqual(t, got, 10, "round %d", round)
			require.Equal(t, 10, got+spend(b, budgetT0, 100), "round %d: the budget counted exactly the granted retries", round)
		}
	})
	t.Run("requests arriving meanwhile", func(t *testing.T) {
		b := NewBudget(DefaultBudgetRatio, DefaultBudgetMinPerSec, DefaultBudgetWindow)
		var granted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range goroutines {
			wg.Go(func() {
				<-start
				for range calls {
					b.Request(budgetT0)
					for b.Retry(budgetT0) {
						granted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		allowance := (goroutines*calls)/5 + 100
		got := int(granted.Load())
		assert.LessOrEqual(t, got, allowance)
		assert.Equal(t, allowance, got+spend(b, budgetT0, 10_000), "the budget counted exactly the granted retries")
	})
}

// budgetLoad sends perSecond GETs per second for d through rt, each from
// its own goroutine started at its fake instant, and returns when all have
// ended. It returns each request's arrival (since the load began), status
// and attempts, in arrival order.
func budgetLoad(t *testing.T, rt http.RoundTripper, perSecond int, d time.Duration) []budgetOutcome {
	t.Helper()
	var wg sync.WaitGroup
	start := time.Now()
	out := make([]budgetOutcome, int(d*time.Duration(perSecond)/time.Second))
	for i := range out {
		if i > 0 {
			time.Sleep(time.Second / time.Duration(perSecond))
		}
		wg.Go(func() {
			o := &out[i]
			o.arrival = time.Since(start)
			req, err := http.NewRequest(http.MethodGet, "http://outage.test/", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			o.status, o.attempts = resp.StatusCode, Attempts(resp)
		})
	}
	wg.Wait()
	return out
}

type budgetOutcome struct {
	arrival  time.Duration
	status   int
	attempts int
}

// tally counts the outcomes that arrived in [from, to) by attempts.
func tally(out []budgetOutcome, from, to time.Duration) (requests, attempts int, byAttempts map[int]int) {
	byAttempts = make(map[int]int)
	for _, o := range out {
		if o.arrival >= from && o.arrival < to {
			requests++
			attempts += o.attempts
			byAttempts[o.attempts]++
		}
	}
	return requests, attempts, byAttempts
}

// outageBase answers 503 until its outage ends, then 200, except during a
// blip, when it answers 503 to the first attempt of each request. It
// counts the attempts it sees while down.
type outageBase struct {
	start               time.Time
	up, blip, blipEnd   time.Duration // since start
	attempts, whileDown atomic.Int64
}

func (b *outageBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.attempts.Add(1)
	status := http.StatusOK
	switch now := time.Since(b.start); {
	case now < b.up:
		b.whileDown.Add(1)
		status = http.StatusServiceUnavailable
	case now >= b.blip && now < b.blipEnd && Attempts(&http.Response{Request: req}) == 1:
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// TestOutageLoadStaysNear1_25x is issue 5's proof: 200 GETs per second
// into a dependency that answers every attempt with 503 for 60 s, with
// MaxAttempts 4. With the default budget (20 % + 10/s over 10 s) the
// dependency sees at most 1.25 attempts per request during the outage;
// without a budget, 4. Traffic goes on after the outage; one window later,
// a one-second blip that fails every request's first attempt is retried in
// full: the budget has recovered.
//
// synctest's clock starts on a whole second, so the outage covers six
// whole windows of the budget.
func TestOutageLoadStaysNear1_25x(t *testing.T) {
	const rate, outage = 200, 60 * time.Second

	t.Run("default budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			require.Zero(t, time.Now().UnixNano()%int64(time.Second), "the outage starts on a slice")
			blip := outage + DefaultBudgetWindow
			base := &outageBase{start: time.Now(), up: outage, blip: blip, blipEnd: blip + time.Second}
			tr := &Transport{Base: base} // nil Budget: the default
			tr.rand = func() float64 { return 0.5 }

			out := budgetLoad(t, tr, rate, blip+time.Second)
			s := tr.Stats()

			requests, attempts, byAttempts := tally(out, 0, outage)
			require.Equal(t, rate*60, requests)
			perRequest := float64(base.whileDown.Load()) / float64(requests)
			t.Logf("outage, default budget: %d requests in %v; the base saw %d attempts while down: %.4f per request",
				requests, outage, base.whileDown.Load(), perRequest)
			t.Logf("the outage's requests made %d attempts in all (%.4f per request; the last retries reached the recovered base); by attempts: %v",
				attempts, float64(attempts)/float64(requests), byAttempts)
			t.Logf("retries granted %d, denied %d", s.Retries, s.BudgetDenied)
			assert.LessOrEqual(t, perRequest, 1.25)
			assert.Greater(t, perRequest, 1.2, "the budget still lets about 20 % retry")
			assert.Positive(t, s.BudgetDenied)
			assert.Equal(t, s.BudgetDenied, s.GiveUps[ReasonBudget])
			assert.EqualValues(t, len(out)+int(s.Retries), base.attempts.Load())

			_, _, byAttempts = tally(out, outage+time.Second, blip)
			assert.Equal(t, map[int]int{1: rate * 9}, byAttempts, "healthy traffic needs no retry")
			requests, _, byAttempts = tally(out, blip, blip+time.Second)
			assert.Equal(t, rate, requests)
			assert.Equal(t, map[int]int{2: rate}, byAttempts, "every request of the blip retried once")
			for _, o := range out[len(out)-rate:] {
				require.Equal(t, http.StatusOK, o.status)
			}
		})
	})
	t.Run("no budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &outageBase{start: time.Now(), up: outage + time.Minute}
			tr := &Transport{Base: base, Budget: UnlimitedBudget()}
			tr.rand = func() float64 { return 0.5 }

			out := budgetLoad(t, tr, rate, outage)
			perRequest := float64(base.whileDown.Load()) / float64(len(out))
			t.Logf("outage, no budget: the base saw %d attempts for %d requests: %.4f per request", base.whileDown.Load(), len(out), perRequest)
			assert.Equal(t, 4.0, perRequest)
			_, _, byAttempts := tally(out, 0, outage)
			assert.Equal(t, map[int]int{4: rate * 60}, byAttempts)
			assert.Zero(t, tr.Stats().BudgetDenied)
		})
	})
}

func TestDeniedRetryReturnsTheLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: statuses(503)}
		var events []GiveUpEvent
		tr := &Transport{
			Base:     base,
			Budget:   NewBudget(0, 0, time.Second), // allows nothing
			OnGiveUp: func(e *GiveUpEvent) { events = append(events, *e) },
		}
		req, err := http.NewRequest(http.MethodGet, "http://down.test/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 1, base.attempts())
		require.Len(t, events, 1)
		assert.Equal(t, ReasonBudget, events[0].Reason)
		assert.Same(t, resp, events[0].Response)
		assert.EqualValues(t, 1, tr.Stats().BudgetDenied)
	})
}

func TestDeniedRetryReturnsTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &fakeBase{answer: refused}, Budget: NewBudget(0, 0, time.Second)}
		req, err := http.NewRequest(http.MethodGet, "http://down.test/", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.Nil(t, resp)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonBudget, e.Reason)
		assert.Equal(t, 1, e.Attempts)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	})
}

func TestBudgetSharedByTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := NewBudget(0, 0.1, 10*time.Second) // one retry per window, in all
		a, b := &fakeBase{answer: statuses(503)}, &fakeBase{answer: statuses(503)}
		ta := &Transport{Base: a, Budget: shared, Policy: Policy{MaxAttempts: 2}}
		tb := &Transport{Base: b, Budget: shared, Policy: Policy{MaxAttempts: 2}}
		budgetGet(t, ta)
		budgetGet(t, tb)
		assert.Equal(t, 2, a.attempts(), "the first Transport took the retry")
		assert.Equal(t, 1, b.attempts(), "none left for the second")
		assert.EqualValues(t, 1, tb.Stats().BudgetDenied)
	})
}

func TestEachTransportOwnsItsDefaultBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &fakeBase{answer: statuses(503)}, &fakeBase{answer: statuses(503)}
		ta := &Transport{Base: a, Policy: Policy{MaxAttempts: 2}}
		tb := &Transport{Base: b, Policy: Policy{MaxAttempts: 2}}
		for range 200 {
			budgetGet(t, ta)
		}
		// 200 requests earn 40 retries, plus the floor of 100.
		assert.Equal(t, 200+140, a.attempts())
		assert.EqualValues(t, 60, ta.Stats().BudgetDenied)
		budgetGet(t, tb)
		assert.Equal(t, 2, b.attempts(), "the second Transport's budget is untouched")
	})
}

// budgetGet sends one GET through rt and closes the response.
func budgetGet(t *testing.T, rt http.RoundTripper) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://budget.test/", nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
}

// TestStatsCountWhatHappened sends one request of each kind and reads the
// counters: logical requests, attempts, retries, budget denials and
// give-ups by reason.
func TestStatsCountWhatHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The base's answer to each request is set by the one sent before it.
		const (
			up    = iota // 200 to every attempt
			down         // 503 to every attempt
			blip         // 503 to a request's first attempt, 200 to its retries
			fault        // a non-transient error
		)
		var mode int
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
			Budget: NewBudget(0, 0.3, 10*time.Second), // three retries per window
			Policy: Policy{MaxAttempts: 3, Backoff: Constant(time.Second)},
		}
		send := func(ctx context.Context, method string, m int) {
			t.Helper()
			mode = m
			req, err := http.NewRequestWithContext(ctx, method, "http://stats.test/", nil)
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
		send(ctx, http.MethodGet, down) // 1 attempt: the budget's 3 retries are spent

		assert.Equal(t, Stats{
			Requests:     7,
			Attempts:     10,
			Retries:      3,
			BudgetDenied: 1,
			GiveUps: map[Reason]uint64{
				ReasonNotIdempotent: 1,
				ReasonNotTransient:  1,
				ReasonDeadline:      1,
				ReasonExhausted:     1,
				ReasonBudget:        1,
			},
		}, tr.Stats())
		assert.Equal(t, 10, base.attempts())
	})
}

// BenchmarkBudget measures the budget's request-path operations from
// parallel goroutines: the deposit of each logical request, a granted
// retry, a denied retry, and the mix of a real client (a deposit and a
// retry request, of which the budget grants about one in five).
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
	b.Run("Request", func(b *testing.B) {
		run(b, new(Budget), func(bg *Budget) { bg.Request(now) })
	})
	b.Run("Retry/granted", func(b *testing.B) {
		run(b, NewBudget(0, math.Inf(1), time.Hour), func(bg *Budget) { bg.Retry(now) })
	})
	b.Run("Retry/denied", func(b *testing.B) {
		run(b, NewBudget(0, 0, time.Hour), func(bg *Budget) { bg.Retry(now) })
	})
	b.Run("RequestAndRetry", func(b *testing.B) {
		run(b, new(Budget), func(bg *Budget) {
			bg.Request(now)
			bg.Retry(now)
		})
	})
}

// The zero Budget has the default size: it behaves exactly as NewBudget
// with the default ratio, floor and window.
func TestZeroBudgetHasTheDefaultSize(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	zero, made := new(Budget), NewBudget(DefaultBudgetRatio, DefaultBudgetMinPerSec, DefaultBudgetWindow)
	var now time.Time
	for i := range 3000 {
		now = start.Add(time.Duration(i) * 7 * time.Millisecond)
		zero.Request(now)
		made.Request(now)
		require.Equal(t, made.Retry(now), zero.Retry(now), "retry %d at %v", i, now.Sub(start))
	}
	var granted int
	for range 1000 {
		if zero.Retry(now) {
			granted++
		}
	}
	assert.Zero(t, granted, "the window is spent")
}

// wallStepped returns t with its wall clock moved by d (whole seconds) and
// its monotonic reading kept: what time.Now returns after the system clock
// is stepped by d. It relies on the layout of time.Time (a wall word whose
// bits 30..62 count seconds when the top bit marks a monotonic reading) and
// checks the result, so a change of that layout fails the test loudly.
func wallStepped(t *testing.T, at time.Time, d time.Duration) time.Time {
	t.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	require.Zero(t, d%time.Second)
	stepped := at
	l := (*layout)(unsafe.Pointer(&stepped))
	require.NotZero(t, l.wall&(1<<63), "a monotonic reading")
	l.wall = uint64(int64(l.wall) + int64(d/time.Second)<<30)
	require.Equal(t, at.UnixNano()+int64(d), stepped.UnixNano(), "the wall clock moved by d")
	require.Zero(t, stepped.Sub(at), "the monotonic reading kept")
	return stepped
}

// A step of the wall clock, back or forward, neither re-grants a spent
// budget nor forgets it: the budget counts time on the monotonic clock.
func TestBudgetIgnoresWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("step "+step.String(), func(t *testing.T) {
			b := NewBudget(0.2, 1, 10*time.Second) // a floor of 10 retries a window
			now := time.Now()
			for i := range 10 {
				require.True(t, b.Retry(now), "retry %d within the floor", i+1)
			}
			require.False(t, b.Retry(now), "the floor is spent")
			later := wallStepped(t, now.Add(time.Second), step)
			assert.False(t, b.Retry(later), "one second later by the monotonic clock: still spent")
		})
	}
}
