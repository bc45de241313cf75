package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
)

// The simulation's attempt loop is its own copy of what a
// retryhttp.Transport does, and its budget timer a copy of the one a
// Transport drives its Budget with. These tests run the same herds through
// real Transports, in fake time, against an in-memory dependency that
// behaves as the simulated one, and compare.
//
// The strategies' randomness is shared: simulate draws the start times
// from its seeded source, then one sample per retry in the order the
// retries happen. The Transports cannot be given that source (they draw
// from their own), so each jittered strategy is wrapped in a BackoffFunc
// that calls the real strategy with a sample from the same seeded source,
// drawn when the Transport asks for a delay. The Transport also asks its
// Backoff for the longest waits left (the horizon of a wait in the
// budget's line) with the largest sample below 1; the wrapper passes that
// sample on and draws nothing. Exponential needs no sample and goes to the
// Transports as it is.
//
// Exact agreement, to the nanosecond: fake time runs the goroutines of one
// instant before it moves on, and the simulation runs the events of one
// instant in the order they were scheduled. When no two timers (an
// attempt's, a budget's, a wait in line's end) fire at one instant, which
// the simulation counts (result.Ties), each instant wakes one goroutine,
// and those it wakes in turn wait for it: then the dependency's capacity,
// the budgets and the shared source see everything in the same order on
// both sides, and every client's attempt instants and outcome agree. The
// jittered strategies draw their waits to the nanosecond and, in the
// scenarios with spread first requests, never meet that case; a test
// checks it.
//
// When timers do fire at one instant, their goroutines run in an order no
// test controls: which client meets the last slot of capacity or the last
// retry of credit, which sample it draws, whether a success counts in the
// budget's round that ends at that instant or in the next. Without jitter
// a released retry waits a round multiple of 100 ms and so lands on a later
// release of the budget's recovery; and first requests all sent at one
// instant start in any order. Then the runs agree in aggregate only, and
// they must: as many clients served, the attempts per client within 10 %,
// and the busiest 10 ms once the dependency is back within the
// dependency's capacity per 10 ms (a herd would be many times that). Over
// 1,000 runs of each such scenario (of 200 clients) the Transports stayed
// within 7 % and within 4 of capacity 5.
//
// A fail-fast budget is the simulation's alone (a Transport's retries wait
// in line), and is not compared.

// programHerd is the herd the program shows by default. It runs through
// Transports with retryhttp's budget only: the others take seconds under
// the race detector and the smaller herds cover them.
const programHerd = "the program's herd"

// transportScenarios are the herds run both ways.
func transportScenarios() map[string]scenario {
	return map[string]scenario{
		"one Transport": small(),
		"clients dealt over 3 Transports": {
			Clients: 120, Spread: 20 * time.Millisecond, Outage: 300 * time.Millisecond,
			Capacity: 5, MaxAttempts: 6, Transports: 3, Seed: 11,
		},
		"first requests spread over a long outage: probes": {
			Clients: 150, Spread: 1500 * time.Millisecond, Outage: 4 * time.Second,
			Capacity: 2, MaxAttempts: 6, Transports: 2, Seed: 5,
		},
		"every first request at one instant": {
			Clients: 200, Spread: 0, Outage: 500 * time.Millisecond,
			Capacity: 5, MaxAttempts: 8, Transports: 1, Seed: 3,
		},
		programHerd: {
			Clients: 1000, Spread: 10 * time.Millisecond, Outage: time.Second,
			Capacity: 20, MaxAttempts: 8, Transports: 1, Seed: 1,
		},
	}
}

func TestTheSimulationRetriesAsTheTransportDoes(t *testing.T) {
	exact, approx := 0, 0
	for name, sc := range transportScenarios() {
		for _, s := range strategies(100*time.Millisecond, 2*time.Second) {
			if s.Budget == failFast || (name == programHerd && s.Budget != inLine) {
				continue
			}
			t.Run(name+"/"+s.Name, func(t *testing.T) {
				want := simulate(sc, s)
				var got *result
				synctest.Test(t, func(t *testing.T) { got = throughTransports(t, sc, s) })

				if want.Ties == 0 {
					exact++
					assert.Equal(t, want.Clients, got.Clients, "each client's attempt instants and outcome")
					assert.Equal(t, comparable(want), got, "arrivals per slot and totals")
					return
				}
				approx++
				assert.Equal(t, want.Succeeded, got.Succeeded, "clients served")
				assert.InDelta(t, want.PerClient(), got.PerClient(), 0.1*want.PerClient(), "attempts per client")
				assert.InDelta(t, want.Peak(sc.Outage), got.Peak(sc.Outage), float64(sc.Capacity), "busiest 10 ms once up")
			})
		}
	}
	// Both kinds of comparison ran: the scenarios are not all of one kind.
	assert.Positive(t, exact, "exact comparisons")
	assert.Positive(t, approx, "comparisons of aggregates")
}

// Every budgeted strategy of the scenarios with spread first requests is
// compared exactly: the jittered ones never put two events on one instant.
func TestTheExactComparisonsCoverTheBudget(t *testing.T) {
	for name, sc := range transportScenarios() {
		if sc.Spread == 0 {
			continue
		}
		for _, s := range strategies(100*time.Millisecond, 2*time.Second) {
			if s.Budget == inLine && s.BackoffName != "no jitter" {
				r := simulate(sc, s)
				assert.Zero(t, r.Ties, "%s/%s", name, s.Name)
				assert.Positive(t, r.BudgetWaits, "%s/%s: retries waited in line", name, s.Name)
			}
		}
	}
}

// comparable returns r without what the Transports do not report: the
// size of the budgets' lines over time, and the count of simultaneous
// events.
func comparable(r *result) *result {
	c := *r
	c.InLine, c.Ties = nil, 0
	return &c
}

// throughTransports runs scenario sc with strategy s through one real
// retryhttp.Transport per client, inside a synctest bubble, and returns
// what the dependency and the clients saw, in simulate's terms.
func throughTransports(t *testing.T, sc scenario, s strategy) *result {
	start := time.Now()
	rng := newRand(sc.Seed)
	starts := startTimes(sc, rng)
	backoff := s.Backoff
	if _, exact := backoff.(retryhttp.Exponential); !exact {
		var mu sync.Mutex
		backoff = retryhttp.BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
			if u != topSample { // a delay, not the longest wait the schedule holds
				mu.Lock()
				u = rng.Float64()
				mu.Unlock()
			}
			return s.Backoff.Delay(n, prev, u)
		})
	}

	transports := max(sc.Transports, 1)
	budgets := make([]*retryhttp.Budget, transports)
	for i := range budgets {
		budgets[i] = retryhttp.UnlimitedBudget()
		if s.Budget == inLine {
			budgets[i] = retryhttp.NewBudget(retryhttp.DefaultBudgetRatio, retryhttp.DefaultBudgetCredit)
		}
	}

	dep := &dependency{start: start, outage: sc.Outage, capacity: sc.Capacity, arrivals: make([][]time.Duration, sc.Clients)}
	ends := make([]outcome, sc.Clients)
	endAt := make([]time.Duration, sc.Clients)
	trs := make([]*retryhttp.Transport, sc.Clients)
	var wg sync.WaitGroup
	for i := range sc.Clients {
		var reason retryhttp.Reason
		trs[i] = &retryhttp.Transport{
			Base:     clientConn{dep: dep, client: i},
			Policy:   retryhttp.Policy{MaxAttempts: sc.MaxAttempts, Backoff: backoff},
			Budget:   budgets[i%transports],
			OnGiveUp: func(e *retryhttp.GiveUpEvent) { reason = e.Reason },
		}
		wg.Go(func() {
			time.Sleep(starts[i])
			resp, err := (&http.Client{Transport: trs[i]}).Get("http://dependency.test/")
			endAt[i] = time.Since(start)
			if !assert.NoError(t, err, "client %d", i) {
				return
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK:
				ends[i] = served
			case reason == retryhttp.ReasonExhausted:
				ends[i] = exhausted
			case reason == retryhttp.ReasonBudget:
				ends[i] = budgetDenied
			default:
				t.Errorf("client %d: status %d, gave up for %v", i, resp.StatusCode, reason)
			}
		})
	}
	wg.Wait()

	r := &result{Strategy: s, Served: dep.served, Failed: dep.failed, Clients: make([]clientRun, sc.Clients)}
	r.GaveUp = make([]int, len(r.Served))
	for i := range r.Clients {
		r.Clients[i] = clientRun{Arrivals: dep.arrivals[i], End: ends[i]}
		r.Attempts += len(dep.arrivals[i])
		r.LastEnd = max(r.LastEnd, endAt[i])
		r.BudgetWaits += int(trs[i].Stats().BudgetWaits)
		switch ends[i] {
		case served:
			r.Succeeded++
			r.LastSuccess = max(r.LastSuccess, endAt[i])
			continue
		case exhausted:
			r.Exhausted++
		case budgetDenied:
			r.BudgetDenied++
		}
		k := int(endAt[i] / slot)
		for len(r.GaveUp) <= k {
			r.Served, r.Failed, r.GaveUp = append(r.Served, 0), append(r.Failed, 0), append(r.GaveUp, 0)
		}
		r.GaveUp[k]++
	}
	return r
}

// dependency is the simulated dependency as an in-memory service: it fails
// everything during the outage, then serves at most capacity requests per
// slot and answers 503 to the rest. It records every arrival.
type dependency struct {
	start    time.Time
	outage   time.Duration
	capacity int

	mu             sync.Mutex
	served, failed []int             // per slot
	arrivals       [][]time.Duration // per client
}

// arrive takes client's attempt now and returns the status it gets.
func (d *dependency) arrive(client int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := time.Since(d.start)
	d.arrivals[client] = append(d.arrivals[client], at)
	i := int(at / slot)
	for len(d.served) <= i {
		d.served = append(d.served, 0)
		d.failed = append(d.failed, 0)
	}
	if at >= d.outage && d.served[i] < d.capacity {
		d.served[i]++
		return http.StatusOK
	}
	d.failed[i]++
	return http.StatusServiceUnavailable
}

// clientConn is one client's connection to the dependency: the base of
// its Transport.
type clientConn struct {
	dep    *dependency
	client int
}

func (c clientConn) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	code := c.dep.arrive(c.client)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode: code,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{},
		Body:    http.NoBody,
		Request: req,
	}, nil
}
