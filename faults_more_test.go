package retryhttp

// More of issue 21's scenarios for TestEverydayFaults: the bounds that hold
// besides (item 9: a fleet at an outage's onset, a slow dependency) and the
// mild overload it reports (item 10).

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// faultCapacity admits perSecond attempts a second (a token bucket holding
// burst, full at the start) and answers the others 503 with no wait and no
// other signal: a server at its capacity.
func faultCapacity(perSecond, burst float64) func(faultAttempt) (int, http.Header, error) {
	tokens, last := burst, time.Duration(0)
	return func(a faultAttempt) (int, http.Header, error) {
		tokens = min(burst, tokens+perSecond*(a.at-last).Seconds())
		last = a.at
		if tokens >= 1 {
			tokens--
			return http.StatusOK, nil, nil
		}
		return http.StatusServiceUnavailable, nil, nil
	}
}

func moreFaultScenarios(short bool) []faultScenario {
	fleetOutage, overloadFor := 30*time.Second, 60*time.Second
	if short {
		fleetOutage, overloadFor = 10*time.Second, 20*time.Second
	}
	return []faultScenario{{
		id:   "fleetOnset",
		name: "fleet 100 x 12/s, outage",
		extra: func(f faultFigures) string {
			return fmt.Sprintf("pk %d/%d", f.peak, f.offered)
		},
		run: func(t *testing.T, mk func(http.RoundTripper) *Transport) faultFigures {
			// 100 clients (a Transport each) at 12 requests a second, phases
			// spread over 1/12 s; 5 s healthy, then down. The figures are of
			// the calls started in the outage, and the busiest 100 ms of
			// its first 2 s against the 120 first attempts offered in one.
			dep := newDependency(-1, 0)
			dep.downAt, dep.down = 5*time.Second, fleetOutage
			var mu sync.Mutex
			var f faultFigures
			var wg sync.WaitGroup
			for i := range 100 {
				tr := mk(dep)
				wg.Go(func() {
					time.Sleep(time.Duration(i) * time.Second / 1200)
					out := load(tr, 12, 5*time.Second+fleetOutage)
					calls, ok, attempts, _ := summarize(out, 5*time.Second, 5*time.Second+fleetOutage)
					mu.Lock()
					f.calls, f.served, f.attempts = f.calls+calls, f.served+ok, f.attempts+attempts
					mu.Unlock()
				})
			}
			wg.Wait()
			f.offered = 120
			f.peak = peakIn(dep, 5*time.Second, 7*time.Second, 100*time.Millisecond)
			return f
		},
		check: func(t *testing.T, def, unl faultFigures) {
			assert.LessOrEqual(t, def.perCall(), 1.35, "issue 21: a fleet at no more than 1.35 attempts per request")
			// Issue 21 asked for 1.5x. Since issue 31 each client's first
			// request to fail is alone (no other failure in the client, and
			// nothing else in flight at 12/s), and gets its policy: its
			// first retry falls within 100 ms of its failure (full jitter),
			// and the first failures of the 100 clients within 83 ms of
			// each other, so the busiest 100 ms holds about 80 of those
			// retries beside the 120 first attempts. What the budget still
			// bounds is every later request's retries.
			assert.LessOrEqual(t, float64(def.peak), 2*float64(def.offered),
				"at the onset, no 100 ms above 2x the first attempts offered")
			assert.GreaterOrEqual(t, unl.perCall(), 3.9, "without a budget a call in the outage makes its 4 attempts")
		},
	}, {
		id:   "slow",
		name: "slow 2 s, 500 ms timeout",
		run: func(t *testing.T, mk func(http.RoundTripper) *Transport) faultFigures {
			// A dependency that answers in 2 s, 20 requests a second for
			// 30 s, each attempt timed out at 500 ms.
			dep := newFaultServer(2*time.Second, func(faultAttempt) (int, http.Header, error) {
				return http.StatusOK, nil, nil
			})
			tr := mk(dep)
			tr.Policy.AttemptTimeout = 500 * time.Millisecond
			var f faultFigures
			f.count(faultSend(tr, faultEvery("dep.test", 20, 30*time.Second, 0)), 0, nil)
			f.attempts = dep.attempts("")
			return f
		},
		check: func(t *testing.T, def, unl faultFigures) {
			assert.LessOrEqual(t, def.perCall(), 1.3, "issue 21: at no more than 1.3 attempts per request")
			assert.GreaterOrEqual(t, unl.perCall(), 3.9, "without a budget each call makes its 4 attempts")
		},
	}, {
		id:   "overload",
		name: "overload 150/s, cap 100/s",
		extra: func(f faultFigures) string {
			return fmt.Sprintf("goodput %.0f/s", f.goodput)
		},
		run: func(t *testing.T, mk func(http.RoundTripper) *Transport) faultFigures {
			// Reported, not targeted: 150 requests a second for 60 s to a
			// server that serves 100 a second and answers 503 beyond.
			dep := newFaultServer(10*time.Millisecond, faultCapacity(100, 10))
			var f faultFigures
			out := faultSend(mk(dep), faultEvery("dep.test", 150, overloadFor, 0))
			f.count(out, 0, nil)
			f.attempts = dep.attempts("")
			f.goodput = float64(f.served) / f.lastServed.Seconds()
			return f
		},
		check: func(t *testing.T, def, unl faultFigures) {
			assert.Positive(t, def.served)
			assert.LessOrEqual(t, def.goodput, 101.0, "the server serves at most its capacity")
		},
	}}
}

// peakIn returns the most arrivals at dep in any window of length w that
// starts in [from, to).
func peakIn(dep *dependency, from, to, w time.Duration) int {
	dep.mu.Lock()
	defer dep.mu.Unlock()
	best := 0
	for _, a := range dep.arrivals {
		if a < from || a >= to {
			continue
		}
		n := 0
		for _, b := range dep.arrivals {
			if b >= a && b < a+w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}
