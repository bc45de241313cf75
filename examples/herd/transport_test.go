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
	"github.com/stretchr/testify/require"
)

// The simulation's attempt loop is its own copy of what a
// retryhttp.Transport does. These tests run the same herd through real
// Transports, in fake time, against an in-memory dependency that behaves
// as the simulated one, and require the same result to the nanosecond:
// every client's attempt instants and outcome, the arrivals per slot, and
// the totals.
//
// The strategies' randomness is shared: simulate draws the start times
// from its seeded source, then one sample per retry in the order the
// retries happen. The Transports cannot be given that source (they draw
// from their own), so each jittered strategy is wrapped in a BackoffFunc
// that calls the real strategy with a sample from the same seeded source,
// drawn when the Transport asks for a delay. Exponential needs no sample
// and goes to the Transports as it is.
//
// Order: fake time runs one goroutine per instant when no two attempts
// happen at the same instant, and then the dependency's capacity, the
// budget and the shared source see the attempts in time order on both
// sides. Each scenario checks that its attempts' instants are all distinct,
// so that the comparison cannot depend on how simultaneous goroutines are
// scheduled.

func TestTheSimulationRetriesAsTheTransportDoes(t *testing.T) {
	scenarios := map[string]scenario{
		"one Transport": small(),
		"clients dealt over 3 Transports": {
			Clients: 120, Spread: 20 * time.Millisecond, Outage: 300 * time.Millisecond,
			Capacity: 3, MaxAttempts: 6, Transports: 3, Seed: 11,
		},
		"first requests over several budget slices": {
			Clients: 150, Spread: 1500 * time.Millisecond, Outage: time.Second,
			Capacity: 2, MaxAttempts: 5, Transports: 4, Seed: 5,
		},
	}
	for name, sc := range scenarios {
		for _, s := range strategies(100*time.Millisecond, 2*time.Second) {
			t.Run(name+"/"+s.Name, func(t *testing.T) {
				want := simulate(sc, s)
				requireDistinctInstants(t, want)

				var got *result
				synctest.Test(t, func(t *testing.T) { got = throughTransports(t, sc, s) })

				assert.Equal(t, want.Clients, got.Clients, "each client's attempt instants and outcome")
				assert.Equal(t, want, got, "arrivals per slot and totals")
			})
		}
	}
}

// requireDistinctInstants fails the test unless no two attempts of r
// happened at the same instant.
func requireDistinctInstants(t *testing.T, r *result) {
	t.Helper()
	seen := map[time.Duration]int{}
	for i, c := range r.Clients {
		for _, at := range c.Arrivals {
			if j, ok := seen[at]; ok {
				require.FailNowf(t, "simultaneous attempts", "clients %d and %d both sent at %v: their order would depend on scheduling", j, i, at)
			}
			seen[at] = i
		}
	}
}

// throughTransports runs scenario sc with strategy s through one real
// retryhttp.Transport per client, inside a synctest bubble, and returns
// what the dependency and the clients saw, in simulate's terms.
func throughTransports(t *testing.T, sc scenario, s strategy) *result {
	start := time.Now()
	// The budget counts time in slices aligned on the Unix epoch: the fake
	// clock must stand where simulate's origin does within a window.
	window := int64(retryhttp.DefaultBudgetWindow)
	require.Equal(t, origin.UnixNano()%window, start.UnixNano()%window, "fake clock and origin are aligned alike")

	rng := newRand(sc.Seed)
	starts := startTimes(sc, rng)
	backoff := s.Backoff
	if _, exact := backoff.(retryhttp.Exponential); !exact {
		var mu sync.Mutex
		backoff = retryhttp.BackoffFunc(func(n int, prev time.Duration, _ float64) time.Duration {
			mu.Lock()
			u := rng.Float64()
			mu.Unlock()
			return s.Backoff.Delay(n, prev, u)
		})
	}

	transports := max(sc.Transports, 1)
	budgets := make([]*retryhttp.Budget, transports)
	for i := range budgets {
		budgets[i] = retryhttp.UnlimitedBudget()
		if s.Budget {
			budgets[i] = retryhttp.NewBudget(retryhttp.DefaultBudgetRatio, retryhttp.DefaultBudgetMinPerSec, retryhttp.DefaultBudgetWindow)
		}
	}

	dep := &dependency{start: start, outage: sc.Outage, capacity: sc.Capacity, arrivals: make([][]time.Duration, sc.Clients)}
	ends := make([]outcome, sc.Clients)
	endAt := make([]time.Duration, sc.Clients)
	var wg sync.WaitGroup
	for i := range sc.Clients {
		var reason retryhttp.Reason
		tr := &retryhttp.Transport{
			Base:     clientConn{dep: dep, client: i},
			Policy:   retryhttp.Policy{MaxAttempts: sc.MaxAttempts, Backoff: backoff},
			Budget:   budgets[i%transports],
			OnGiveUp: func(e *retryhttp.GiveUpEvent) { reason = e.Reason },
		}
		wg.Go(func() {
			time.Sleep(starts[i])
			resp, err := (&http.Client{Transport: tr}).Get("http://dependency.test/")
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
	for i := range r.Clients {
		r.Clients[i] = clientRun{Arrivals: dep.arrivals[i], End: ends[i]}
		r.Attempts += len(dep.arrivals[i])
		r.LastEnd = max(r.LastEnd, endAt[i])
		switch ends[i] {
		case served:
			r.Succeeded++
			r.LastSuccess = max(r.LastSuccess, endAt[i])
		case exhausted:
			r.Exhausted++
		case budgetDenied:
			r.BudgetDenied++
		}
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
