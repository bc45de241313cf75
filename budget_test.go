package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// ---- the public Budget (its machinery is tested in internal/budget) ----

var budgetT0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// spend asks b for retries at now until it refuses one (or limit were
// granted) and returns how many it granted.
func spend(b *Budget, now time.Time, limit int) int {
	n := 0
	for n < limit && b.retry(now) {
		n++
	}
	return n
}

func TestNilAndUnlimitedBudgetsAllowEveryRetry(t *testing.T) {
	for name, b := range map[string]*Budget{"nil": nil, "unlimited": UnlimitedBudget()} {
		t.Run(name, func(t *testing.T) {
			b.failure(budgetT0)
			b.succeeded(clock.Real{}, 1)
			b.refund()
			assert.Equal(t, 100_000, spend(b, budgetT0, 100_000))
			assert.True(t, b.wait(clock.Real{}, t.Context(), budgetT0), "released at once")
			assert.Nil(t, b.machine(), "no machinery: nothing is counted")
		})
	}
}

func TestNewBudgetArguments(t *testing.T) {
	b := NewBudget(-1, -5)
	assert.Equal(t, 0, spend(b, budgetT0, 100), "no credit")
	b = NewBudget(-1, 1)
	assert.Equal(t, 1, spend(b, budgetT0, 100))
	for range 100 {
		b.succeeded(clock.Real{}, 1)
	}
	assert.Equal(t, 0, spend(b, budgetT0, 100), "a negative ratio earns nothing")
	assert.Equal(t, 10, spend(new(Budget), budgetT0, 100), "the zero Budget holds the default credit")
	z := new(Budget)
	spend(z, budgetT0, 100)
	for range 5 {
		z.succeeded(clock.Real{}, 1)
	}
	assert.Equal(t, 1, spend(z, budgetT0, 100), "and earns the default ratio")
}

// ---- the Budget under a Transport, in fake time ----

// dependency is a fake base in fake time: down (503 to every attempt) from
// its start until up, then serving capacity attempts per 10 ms slot and
// answering 503 to the rest (capacity 0: no limit). While failing is true
// it fails each attempt with probability failRate (from a seeded source).
// It records when each attempt arrived.
type dependency struct {
	start    time.Time
	up       time.Duration // since start; < 0: never down
	down     time.Duration // a second outage from up+... (0: none): [downAt, downAt+down)
	downAt   time.Duration
	capacity int
	failRate float64

	mu       sync.Mutex
	rng      *rand.Rand
	arrivals []time.Duration // since start
	nth      []int           // the attempt number of each arrival
	slots    map[int64]int
}

func newDependency(up time.Duration, capacity int) *dependency {
	return &dependency{start: time.Now(), up: up, capacity: capacity,
		rng: rand.New(rand.NewPCG(1, 2)), slots: make(map[int64]int)}
}

func (d *dependency) RoundTrip(req *http.Request) (*http.Response, error) {
	d.mu.Lock()
	now := time.Since(d.start)
	d.arrivals = append(d.arrivals, now)
	d.nth = append(d.nth, Attempts(&http.Response{Request: req}))
	ok := now >= d.up && !(d.down > 0 && now >= d.downAt && now < d.downAt+d.down)
	if ok && d.capacity > 0 {
		slot := int64(now / (10 * time.Millisecond))
		d.slots[slot]++
		ok = d.slots[slot] <= d.capacity
	}
	if ok && d.failRate > 0 {
		ok = d.rng.Float64() >= d.failRate
	}
	d.mu.Unlock()
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// peak returns the most arrivals in any window of length w starting at or
// after from (windows slide by arrival).
func (d *dependency) peak(from, w time.Duration) int {
	n, _ := d.peakAt(from, w)
	return n
}

// peakAt is peak, with the start of the busiest window.
func (d *dependency) peakAt(from, w time.Duration) (int, time.Duration) {
	d.mu.Lock()
	a := append([]time.Duration(nil), d.arrivals...)
	d.mu.Unlock()
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	best, when, j := 0, time.Duration(0), 0
	for i := range a {
		if a[i] < from {
			continue
		}
		if j < i {
			j = i
		}
		for j < len(a) && a[j] < a[i]+w {
			j++
		}
		if j-i > best {
			best, when = j-i, a[i]
		}
	}
	return best, when
}

// count returns the arrivals in [from, to).
func (d *dependency) count(from, to time.Duration) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.arrivals {
		if a >= from && a < to {
			n++
		}
	}
	return n
}

// lockedRand is a seeded source of uniform samples safe for the concurrent
// requests of a Transport.
func lockedRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

type loadOutcome struct {
	start, held time.Duration // since the load began
	status      int
	attempts    int
	err         error
}

// load sends perSecond GETs per second for d through rt, each from its own
// goroutine started at its fake instant, and returns when all have ended.
func load(rt http.RoundTripper, perSecond int, d time.Duration) []loadOutcome {
	n := int(d * time.Duration(perSecond) / time.Second)
	return burst(rt, n, time.Second/time.Duration(perSecond))
}

// burst sends n GETs through rt, gap apart (0: all at once).
func burst(rt http.RoundTripper, n int, gap time.Duration) []loadOutcome {
	var wg sync.WaitGroup
	begin := time.Now()
	out := make([]loadOutcome, n)
	for i := range out {
		if i > 0 && gap > 0 {
			time.Sleep(gap)
		}
		wg.Go(func() {
			o := &out[i]
			o.start = time.Since(begin)
			req, _ := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
			resp, err := rt.RoundTrip(req)
			o.held = time.Since(begin) - o.start
			if err != nil {
				o.err = err
				var e *Error
				if errors.As(err, &e) {
					o.attempts = e.Attempts
				}
				return
			}
			resp.Body.Close()
			o.status, o.attempts = resp.StatusCode, Attempts(resp)
		})
	}
	wg.Wait()
	return out
}

// summary of the calls that started in [from, to).
func summarize(out []loadOutcome, from, to time.Duration) (calls, ok, attempts int, longest time.Duration) {
	for _, o := range out {
		if o.start < from || o.start >= to {
			continue
		}
		calls++
		attempts += o.attempts
		if o.err == nil && o.status == http.StatusOK {
			ok++
		}
		longest = max(longest, o.held)
	}
	return calls, ok, attempts, longest
}

// Blip: 1,000 concurrent callers of one Transport (MaxAttempts 8) while the
// dependency is down for a second; then it serves 20 attempts per 10 ms and
// fails the rest. The budget lets about its credit through while it is
// down, holds the rest in line, and releases them on the dependency's first
// success as a ramp: every caller is served, with few attempts, and the
// recovered dependency is never flooded.
func TestBudgetBlip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newDependency(time.Second, 20)
		tr := &Transport{Base: dep, Policy: Policy{MaxAttempts: 8}, rand: lockedRand(1)}
		out := burst(tr, 1000, 0)
		calls, ok, attempts, longest := summarize(out, 0, time.Hour)
		peak := dep.peak(time.Second, 10*time.Millisecond)
		t.Logf("blip: %d/%d callers served, %.2f attempts per caller, peak %d per 10 ms once up, longest call %v; %+v",
			ok, calls, float64(attempts)/float64(calls), peak, longest, tr.Stats())
		assert.GreaterOrEqual(t, float64(ok)/float64(calls), 0.99)
		assert.LessOrEqual(t, float64(attempts)/float64(calls), 3.0)
		assert.Equal(t, int(dep.count(0, time.Hour)), attempts, "the dependency saw every attempt counted")
		assert.LessOrEqual(t, peak, 60)
	})
}

// Storm: 200 requests a second, 10 s healthy, then 60 s down, then up
// again. While down, the dependency sees barely more than the first
// attempts, in no 100 ms window more than twice what is offered, and no
// call is held long. Once up, a request whose first attempt fails is
// retried at once and served.
func TestBudgetStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 200
		dep := newDependency(-1, 0)
		dep.downAt, dep.down = 10*time.Second, 60*time.Second
		tr := &Transport{Base: dep, rand: lockedRand(2)}
		out := load(tr, rate, 72*time.Second)

		calls, _, attempts, _ := summarize(out, 10*time.Second, 70*time.Second)
		perCall := float64(attempts) / float64(calls)
		whileDown := dep.count(10*time.Second, 70*time.Second)
		_, _, _, longest := summarize(out, 0, time.Hour)
		peak, when := dep.peakAt(0, 100*time.Millisecond)
		t.Logf("storm: %d calls in the outage, %.4f attempts per call (%d arrivals while down), peak %d per 100 ms at %v, longest call %v; %+v",
			calls, perCall, whileDown, peak, when, longest, tr.Stats())
		assert.LessOrEqual(t, perCall, 1.30)
		assert.LessOrEqual(t, float64(whileDown)/float64(calls), 1.30)
		byN := map[int]int{}
		for i, a := range dep.arrivals {
			if a >= when && a < when+100*time.Millisecond {
				byN[dep.nth[i]]++
			}
		}
		t.Logf("peak window by attempt: %v", byN)
		assert.LessOrEqual(t, peak, 40, "no 100 ms window over twice the 20 offered")
		assert.LessOrEqual(t, longest, 15*time.Second)

		calls, ok, _, _ := summarize(out, 70*time.Second+200*time.Millisecond, time.Hour)
		assert.Equal(t, calls, ok, "after the outage every call is served")

		// Recovery: a request failing once after the outage is retried and
		// served within a second.
		dep.mu.Lock()
		dep.failRate = 1 // the next attempt fails
		dep.mu.Unlock()
		var retried time.Duration
		tr.OnRetry = func(e *RetryEvent) {
			dep.mu.Lock()
			dep.failRate = 0
			dep.mu.Unlock()
			retried = e.Delay + e.BudgetWait
		}
		start := time.Now()
		one := burst(tr, 1, 0)[0]
		require.NoError(t, one.err)
		assert.Equal(t, http.StatusOK, one.status)
		assert.Equal(t, 2, one.attempts)
		assert.Less(t, time.Since(start), time.Second, "retried and served within a second (waited %v)", retried)
	})
}

// Fleet: 100 Transports, each with its own default budget, 12 requests a
// second each, into a 30 s full outage: the credits and probes of a fleet
// do not add up to a storm.
func TestBudgetFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newDependency(time.Hour, 0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var calls, attempts int
		for i := range 100 {
			tr := &Transport{Base: dep, rand: lockedRand(uint64(i) + 10)}
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Second / 1200) // phases spread over 1/12 s
				out := load(tr, 12, 30*time.Second)
				c, _, a, _ := summarize(out, 0, time.Hour)
				mu.Lock()
				calls, attempts = calls+c, attempts+a
				mu.Unlock()
			})
		}
		wg.Wait()
		perCall := float64(attempts) / float64(calls)
		t.Logf("fleet: %d calls, %.4f attempts per call", calls, perCall)
		assert.Equal(t, 100*12*30, calls)
		assert.LessOrEqual(t, perCall, 1.35)
	})
}

// Sparse errors: a client at 5 requests a second whose attempts fail
// independently one time in ten retries every failure: a budget never
// bites a healthy client.
func TestBudgetSparseErrorsAreAllRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newDependency(-1, 0)
		dep.failRate = 0.1
		tr := &Transport{Base: dep, rand: lockedRand(3)}
		out := load(tr, 5, 10*time.Minute)
		s := tr.Stats()
		calls, ok, attempts, _ := summarize(out, 0, time.Hour)
		t.Logf("sparse errors: %d calls, %d served, %d attempts; %+v", calls, ok, attempts, s)
		assert.Zero(t, s.BudgetWaits, "no retry waited for the budget")
		assert.Zero(t, s.BudgetDenied)
		assert.Equal(t, calls-ok, int(s.GiveUps[ReasonExhausted]), "only four failures in a row end a call")
		assert.EqualValues(t, attempts-calls, s.Retries, "every failure with attempts left was retried")
	})
}

// A retry that cannot be paid for waits in line no longer than its backoff
// schedule would have taken, then gives up with ReasonBudget: the caller
// gets the last response, its body intact, and learns how long it waited.
func TestBudgetWaitEndsWithTheBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{answer: func(_ int, req *http.Request) (*http.Response, error) {
			return response(req, http.StatusServiceUnavailable, nil, "come back later"), nil
		}}
		var events []GiveUpEvent
		tr := &Transport{
			Base:     base,
			Budget:   NewBudget(0, 1),
			Policy:   Policy{Backoff: Constant(100 * time.Millisecond)}, // 3 retries: 300 ms in all
			OnGiveUp: func(e *GiveUpEvent) { events = append(events, *e) },
		}
		require.True(t, tr.init2().retry(time.Now()), "spend the only retry")
		start := time.Now()
		resp, err := tr.RoundTrip(newGet(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "come back later", readBody(t, resp))
		assert.Equal(t, 300*time.Millisecond, time.Since(start), "the schedule's 3 waits of 100 ms")
		require.Len(t, events, 1)
		assert.Equal(t, ReasonBudget, events[0].Reason)
		assert.Same(t, resp, events[0].Response)
		assert.Equal(t, 300*time.Millisecond, events[0].BudgetWait)
		assert.Equal(t, 1, base.attempts())
		assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
		assert.EqualValues(t, 1, tr.Stats().BudgetDenied)
	})
}

// The caller's deadline ends a wait in line too, with the deadline's reason.
func TestBudgetWaitEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &fakeBase{answer: refused}, Budget: NewBudget(0, 1),
			Policy: Policy{Backoff: Constant(300 * time.Millisecond)}}
		tr.init2().retry(time.Now())
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
// recovery, after its own backoff if that is longer.
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
			Policy:  Policy{MaxAttempts: 8, Backoff: Constant(100 * time.Millisecond)}, // 700 ms in all
			OnRetry: func(e *RetryEvent) { ev = *e }}
		tr.init2().retry(time.Now())
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
		assert.Equal(t, 1, b.attempts(), "none left for the second")
		assert.EqualValues(t, 1, tb.Stats().BudgetDenied)
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
		assert.Equal(t, 20+DefaultBudgetCredit, a.attempts(), "the default credit, then no more")
		budgetGet(t, tb)
		assert.Equal(t, 2, b.attempts(), "the second Transport's budget is untouched")
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
			Budget: NewBudget(0, 3), // three retries, never earned back
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
		// The budget's 3 retries are spent: the retry waits in line; after a
		// second without news it goes as a probe, fails, and waits again
		// until its schedule (2 s) has passed: 2 attempts.
		send(ctx, http.MethodGet, down)

		assert.Equal(t, Stats{
			Requests:     7,
			Attempts:     11,
			Retries:      4,
			BudgetWaits:  2,
			BudgetDenied: 1,
			GiveUps: map[Reason]uint64{
				ReasonNotIdempotent: 1,
				ReasonNotTransient:  1,
				ReasonDeadline:      1,
				ReasonExhausted:     1,
				ReasonBudget:        1,
			},
		}, tr.Stats())
		assert.Equal(t, 11, base.attempts())
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
		run(b, new(Budget), func(bg *Budget) { bg.succeeded(clock.Real{}, 1) })
	})
	b.Run("retry/granted", func(b *testing.B) {
		run(b, new(Budget), func(bg *Budget) {
			bg.retry(now)
			bg.refund()
		})
	})
	b.Run("retry/refused", func(b *testing.B) {
		run(b, NewBudget(0, 1), func(bg *Budget) { bg.retry(now) })
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
			budgetGet(t, tr) // each waits in line (for no time) and gives up
			time.Sleep(time.Second)
		}
		warnings := strings.Count(buf.String(), "retry budget spent")
		assert.Equal(t, 3, warnings, "30 requests over 30 s: one warning per 10 s\n%s", buf.String())
		assert.Contains(t, buf.String(), "retryhttp.budget_waits=21")
		assert.EqualValues(t, 30, tr.Stats().BudgetDenied)
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
