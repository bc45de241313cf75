package main

import (
	"container/heap"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
)

// slot is the dependency's accounting period: it serves at most Capacity
// requests per slot and fails the rest with 503.
const slot = 10 * time.Millisecond

// origin is where the virtual clock starts. Only differences matter; a fixed
// instant keeps the budget's time slices identical from run to run.
var origin = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// A scenario describes the crowd and the dependency.
type scenario struct {
	Clients     int           // clients, each sending one logical request
	Spread      time.Duration // first attempts are uniform in [0, Spread)
	Outage      time.Duration // the dependency fails everything in [0, Outage)
	Capacity    int           // requests served per slot once it is back
	MaxAttempts int           // attempts per client, the first included
	Transports  int           // Transports (budgets) the clients are dealt over
	Seed        uint64
}

// A strategy is a way of retrying: one of retryhttp's backoffs, with or
// without a retryhttp.Budget.
type strategy struct {
	Name    string
	Backoff retryhttp.Backoff
	Budget  bool
}

// strategies returns the eight strategies compared, in display order.
func strategies(base, cap time.Duration) []strategy {
	backoffs := []strategy{
		{Name: "no jitter", Backoff: retryhttp.Exponential{Base: base, Cap: cap}},
		{Name: "full jitter", Backoff: retryhttp.FullJitter{Base: base, Cap: cap}},
		{Name: "equal jitter", Backoff: retryhttp.EqualJitter{Base: base, Cap: cap}},
		{Name: "decorrelated", Backoff: retryhttp.DecorrelatedJitter{Base: base, Cap: cap}},
	}
	out := append([]strategy(nil), backoffs...)
	for _, s := range backoffs {
		s.Name += " + budget"
		s.Budget = true
		out = append(out, s)
	}
	return out
}

// A result is what one strategy did to the dependency.
type result struct {
	Strategy strategy

	// Served and Failed count arrivals at the dependency per slot: slot i
	// covers [i*slot, (i+1)*slot). Failed includes the outage's failures.
	Served, Failed []int

	Attempts     int           // attempts sent, first ones included
	Succeeded    int           // clients that got a response
	Exhausted    int           // clients that used MaxAttempts and failed
	BudgetDenied int           // clients whose retry the budget refused
	LastSuccess  time.Duration // when the last successful client succeeded
	LastEnd      time.Duration // when the last client succeeded or gave up

	// Clients holds each client's run, in client order.
	Clients []clientRun
}

// A clientRun is one client's logical request: when each of its attempts
// reached the dependency, and how it ended.
type clientRun struct {
	Arrivals []time.Duration
	End      outcome
}

// An outcome is how a client's logical request ended.
type outcome uint8

const (
	pending      outcome = iota // not ended yet
	served                      // an attempt was served
	exhausted                   // MaxAttempts attempts failed
	budgetDenied                // the budget refused a retry
)

// Peak returns the most arrivals in one slot that starts at or after from.
func (r *result) Peak(from time.Duration) int {
	peak := 0
	for i := int((from + slot - 1) / slot); i < len(r.Served); i++ {
		peak = max(peak, r.Served[i]+r.Failed[i])
	}
	return peak
}

// Unfinished returns how many clients never succeeded.
func (r *result) Unfinished() int { return r.Exhausted + r.BudgetDenied }

// arrival is a pending attempt on the event queue.
type arrival struct {
	at     time.Duration // virtual time since origin
	seq    int           // tie-break: equal times run in scheduling order
	client int
}

type queue []arrival

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(arrival)) }
func (q *queue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// client is one client's progress through its logical request.
type client struct {
	attempts int           // attempts made so far
	prev     time.Duration // the wait before the latest retry
	budget   *retryhttp.Budget
}

// simulate runs the scenario under strategy s: a discrete-event loop over a
// virtual clock. Each step takes the earliest pending attempt, lets the
// dependency serve or fail it, and for a failure does what a
// retryhttp.Transport does in its attempt loop: give up after MaxAttempts,
// otherwise compute the wait with s.Backoff.Delay(retries made, previous
// wait, a uniform sample), ask the budget with Budget.Retry(now), and
// schedule the next attempt after the wait. Every logical request calls
// Budget.Request(now) when it starts, as RoundTrip does. The same seed gives
// the same result.
func simulate(sc scenario, s strategy) *result {
	rng := newRand(sc.Seed)
	starts := startTimes(sc, rng)
	r := &result{Strategy: s, Clients: make([]clientRun, sc.Clients)}

	transports := max(sc.Transports, 1)
	budgets := make([]*retryhttp.Budget, transports) // nil allows every retry
	if s.Budget {
		for i := range budgets {
			budgets[i] = retryhttp.NewBudget(retryhttp.DefaultBudgetRatio, retryhttp.DefaultBudgetMinPerSec, retryhttp.DefaultBudgetWindow)
		}
	}

	clients := make([]client, sc.Clients)
	q := make(queue, 0, sc.Clients)
	seq := 0
	for i := range clients {
		clients[i].budget = budgets[i%transports]
		q = append(q, arrival{at: starts[i], seq: seq, client: i})
		seq++
	}
	heap.Init(&q)

	for q.Len() > 0 {
		a := heap.Pop(&q).(arrival)
		c := &clients[a.client]
		now := origin.Add(a.at)
		if c.attempts == 0 {
			c.budget.Request(now)
		}
		c.attempts++
		r.Attempts++
		run := &r.Clients[a.client]
		run.Arrivals = append(run.Arrivals, a.at)

		i := int(a.at / slot)
		for len(r.Served) <= i {
			r.Served = append(r.Served, 0)
			r.Failed = append(r.Failed, 0)
		}
		if a.at >= sc.Outage && r.Served[i] < sc.Capacity {
			r.Served[i]++
			r.Succeeded++
			run.End = served
			r.LastSuccess = max(r.LastSuccess, a.at)
			r.LastEnd = max(r.LastEnd, a.at)
			continue
		}
		r.Failed[i]++

		if c.attempts >= sc.MaxAttempts {
			r.Exhausted++
			run.End = exhausted
			r.LastEnd = max(r.LastEnd, a.at)
			continue
		}
		delay := max(s.Backoff.Delay(c.attempts-1, c.prev, rng.Float64()), 0)
		if !c.budget.Retry(now) {
			r.BudgetDenied++
			run.End = budgetDenied
			r.LastEnd = max(r.LastEnd, a.at)
			continue
		}
		c.prev = delay
		heap.Push(&q, arrival{at: a.at + delay, seq: seq, client: a.client})
		seq++
	}
	return r
}

// newRand returns the run's random source for a seed. A run draws the
// clients' start times from it first, then one sample per retry, in the
// order the retries happen, as a Transport shared by the clients would.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x6865726421)) // "herd!"
}

// startTimes draws each client's first attempt, uniform in [0, Spread).
func startTimes(sc scenario, rng *rand.Rand) []time.Duration {
	starts := make([]time.Duration, sc.Clients)
	if sc.Spread > 0 {
		for i := range starts {
			starts[i] = time.Duration(rng.Int64N(int64(sc.Spread)))
		}
	}
	return starts
}
