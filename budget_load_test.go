package retryhttp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Budget under a Transport, under load, in fake time: a fake dependency
// that goes down and comes back, and the outages a budget must bound.

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

// Blip: 1,000 concurrent callers of one Transport while the dependency is
// down for a second; then it serves 20 attempts per 10 ms and fails the
// rest. With MaxAttempts 8 (a schedule of 12.7 s), the budget lets about
// its credit through while it is down, holds the rest in line, and lets
// them go as the dependency's successes pay for them: every caller is
// served, with few attempts, and the recovered dependency is never
// flooded. With the default policy, whose schedule (0.7 s) ends inside the
// outage, the line holds no caller past it: each ends within 0.7 s, with
// about one attempt, as its policy's four attempts would all have failed.
func TestBudgetBlip(t *testing.T) {
	for _, maxAttempts := range []int{0, 8} { // the default (4), and 8
		t.Run(fmt.Sprintf("MaxAttempts %d", maxAttempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dep := newDependency(time.Second, 20)
				tr := &Transport{Base: dep, Policy: Policy{MaxAttempts: maxAttempts}, rand: lockedRand(1)}
				out := burst(tr, 1000, 0)
				calls, ok, attempts, longest := summarize(out, 0, time.Hour)
				peak := dep.peak(time.Second, 10*time.Millisecond)
				t.Logf("blip: %d/%d callers served, %.2f attempts per caller, peak %d per 10 ms once up, longest call %v; %+v",
					ok, calls, float64(attempts)/float64(calls), peak, longest, tr.Stats())
				assert.Equal(t, int(dep.count(0, time.Hour)), attempts, "the dependency saw every attempt counted")
				if maxAttempts == 0 {
					assert.LessOrEqual(t, longest, 700*time.Millisecond, "no call held past its schedule")
					assert.LessOrEqual(t, float64(attempts)/float64(calls), 1.02)
					return
				}
				assert.GreaterOrEqual(t, float64(ok)/float64(calls), 0.99)
				assert.LessOrEqual(t, float64(attempts)/float64(calls), 3.0)
				assert.LessOrEqual(t, peak, 60)
			})
		})
	}
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
		peak := peakIn(dep, 0, 70*time.Second-100*time.Millisecond, 100*time.Millisecond)
		back := peakIn(dep, 70*time.Second-100*time.Millisecond, time.Hour, 100*time.Millisecond)
		t.Logf("storm: %d calls in the outage, %.4f attempts per call (%d arrivals while down), peak %d per 100 ms "+
			"until the recovery, %d after it, longest call %v; %+v",
			calls, perCall, whileDown, peak, back, longest, tr.Stats())
		assert.LessOrEqual(t, perCall, 1.30)
		assert.LessOrEqual(t, float64(whileDown)/float64(calls), 1.30)
		assert.LessOrEqual(t, peak, 40, "until the recovery, no 100 ms window over twice the 20 offered")
		// At the recovery the line lets its retries go as the host answers:
		// one a success, each paid by the credit and given back when it
		// succeeds. This dependency answers at once, so they all go in the
		// instant it is back; each was held inside its schedule.
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
// bites a healthy client. (Each retry waits in line for the next news of
// the host after its failure: another request's success, or a probe after
// 100 to 200 ms without news.)
func TestBudgetSparseErrorsAreAllRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newDependency(-1, 0)
		dep.failRate = 0.1
		var mu sync.Mutex // OnRetry runs on the calls' goroutines
		var longest time.Duration
		tr := &Transport{Base: dep, rand: lockedRand(3),
			OnRetry: func(e *RetryEvent) {
				mu.Lock()
				longest = max(longest, e.BudgetWait)
				mu.Unlock()
			}}
		out := load(tr, 5, 10*time.Minute)
		s := tr.Stats()
		calls, ok, attempts, _ := summarize(out, 0, time.Hour)
		t.Logf("sparse errors: %d calls, %d served, %d attempts; %+v", calls, ok, attempts, s)
		assert.Less(t, longest, time.Second, "no retry waited in line a second")
		assert.Zero(t, s.BudgetRefusals)
		assert.Equal(t, calls-ok, int(s.GiveUps[ReasonExhausted]), "only four failures in a row end a call")
		assert.EqualValues(t, attempts-calls, s.Retries, "every failure with attempts left was retried")
	})
}
