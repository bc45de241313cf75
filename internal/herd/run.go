package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/clock"
)

// simulate runs the scenario under strategy s through real
// retryhttp.Transports (one per client, the budgets dealt over them) on a
// virtual clock: each client's request is one RoundTrip, and its attempts
// go to an in-memory dependency that fails everything during the outage and
// then serves at most Capacity per slot. The Transports run their own
// attempt loop, backoff and budget; the clock jumps from timer to timer, so
// a run of minutes takes a fraction of a second and the same seed gives the
// same result.
func simulate(sc scenario, s strategy) *result {
	v := clock.NewVirtual(origin)
	rng := newRand(sc.Seed)
	starts := startTimes(sc, rng)
	b := base{clk: v, start: origin, rand: rng.Float64}
	dep := newDependency(sc, b)
	runs := runClients(sc, s, dep, b, func(at time.Duration, f func()) { v.At(origin.Add(at), f) }, starts)
	v.Run()
	r := runs.result(sc, s, dep)
	r.Ties = v.Ties()
	return r
}

// clients is what the clients of one run saw: how each request ended, and
// when.
type clients struct {
	trs   []*retryhttp.Transport
	ends  []outcome
	endAt []time.Duration
}

// runClients starts each client's request at its start time (by go) through
// a Transport of its own over b, sharing the budgets. start runs f at a time
// on the run's clock; the result is complete once every f has returned.
func runClients(sc scenario, s strategy, dep *dependency, b base, start func(time.Duration, func()), starts []time.Duration) *clients {
	transports := max(sc.Transports, 1)
	budgets := make([]*retryhttp.Budget, transports)
	for i := range budgets {
		budgets[i] = retryhttp.UnlimitedBudget()
		if s.Budget == inLine {
			budgets[i] = new(retryhttp.Budget) // the default size
		}
	}
	cs := &clients{trs: make([]*retryhttp.Transport, sc.Clients), ends: make([]outcome, sc.Clients),
		endAt: make([]time.Duration, sc.Clients)}
	var mu sync.Mutex // the clients' records (goroutines of a real clock run at once)
	for i := range sc.Clients {
		var reason retryhttp.Reason
		var waited time.Duration // in line, before the last wait
		cs.trs[i] = &retryhttp.Transport{
			Base:   client{base: b, dep: dep, id: i},
			Policy: retryhttp.Policy{MaxAttempts: sc.MaxAttempts, Backoff: s.Backoff},
			Budget: budgets[i%transports],
			OnRetry: func(e *retryhttp.RetryEvent) {
				// A retry waits in line from its failure: none waits there
				// for no time (its own failure is news, which puts off a
				// probe, and its time in line ends later).
				if e.BudgetWait > 0 {
					dep.leftLine(i, e.BudgetWait, evReleased)
					waited += e.BudgetWait
				}
			},
			OnGiveUp: func(e *retryhttp.GiveUpEvent) {
				reason = e.Reason
				if last := e.BudgetWait - waited; last > 0 && e.Reason == retryhttp.ReasonBudget {
					dep.leftLine(i, last, evRefused)
				}
			},
		}
		start(starts[i], func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://dependency.test/", nil)
			resp, err := cs.trs[i].RoundTrip(req)
			end := pending // a request that ended otherwise (none does)
			switch {
			case err != nil:
			case resp.StatusCode == http.StatusOK:
				end = served
			case reason == retryhttp.ReasonExhausted:
				end = exhausted
			case reason == retryhttp.ReasonBudget:
				end = budgetDenied
			}
			if resp != nil {
				resp.Body.Close()
			}
			mu.Lock()
			cs.ends[i], cs.endAt[i] = end, b.since()
			mu.Unlock()
		})
	}
	return cs
}

// result returns the run in a result's terms.
func (cs *clients) result(sc scenario, s strategy, dep *dependency) *result {
	r := &result{Strategy: s, Served: dep.served, Failed: dep.failed, Clients: make([]clientRun, sc.Clients),
		Events: dep.events}
	grow := func(k int) {
		for len(r.Served) <= k {
			r.Served, r.Failed = append(r.Served, 0), append(r.Failed, 0)
		}
	}
	for i := range r.Clients {
		r.Clients[i] = clientRun{Arrivals: dep.arrivals[i], End: cs.ends[i]}
		r.Attempts += len(dep.arrivals[i])
		r.LastEnd = max(r.LastEnd, cs.endAt[i])
		r.BudgetWaits += int(cs.trs[i].Stats().BudgetWaits)
		grow(int(cs.endAt[i] / slot))
		switch cs.ends[i] {
		case served:
			r.Succeeded++
			r.LastSuccess = max(r.LastSuccess, cs.endAt[i])
		case exhausted:
			r.Exhausted++
		case budgetDenied:
			r.BudgetRefusals++
		}
	}
	r.GaveUp = make([]int, len(r.Served))
	for i, end := range cs.ends {
		if end != served {
			r.GaveUp[int(cs.endAt[i]/slot)]++
		}
	}
	r.InLine = inLineBySlot(r.Events, len(r.Served))
	return r
}

// inLineBySlot returns the most waits in line at once during each of n
// slots, from the ends of the waits among events.
func inLineBySlot(events []event, n int) []int {
	type change struct {
		at time.Duration
		d  int
	}
	var cs []change
	for _, e := range events {
		if e.Kind == evReleased || e.Kind == evRefused {
			cs = append(cs, change{e.Since, 1}, change{e.At, -1})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].at != cs[j].at {
			return cs[i].at < cs[j].at
		}
		return cs[i].d < cs[j].d // a wait that ends as another begins: not both at once
	})
	out := make([]int, n)
	level, k := 0, 0
	for i := range out {
		out[i] = level
		for ; k < len(cs) && cs[k].at < time.Duration(i+1)*slot; k++ {
			level += cs[k].d
			out[i] = max(out[i], level)
		}
	}
	return out
}

// dependency is the simulated dependency as an in-memory service: it fails
// everything during the outage, then serves at most capacity requests per
// slot and answers 503 to the rest. It records every arrival, and keeps the
// run's log of events: its arrivals, and the ends of the waits in line that
// the clients report (leftLine), in one order.
type dependency struct {
	since    func() time.Duration // the time on the run's clock
	outage   time.Duration
	capacity int

	mu             sync.Mutex
	served, failed []int             // per slot
	arrivals       [][]time.Duration // per client
	events         []event
}

func newDependency(sc scenario, b base) *dependency {
	return &dependency{since: b.since, outage: sc.Outage, capacity: sc.Capacity,
		arrivals: make([][]time.Duration, sc.Clients)}
}

// arrive takes client's attempt now and returns the status it gets.
func (d *dependency) arrive(client int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := d.since()
	d.arrivals[client] = append(d.arrivals[client], at)
	i := int(at / slot)
	for len(d.served) <= i {
		d.served = append(d.served, 0)
		d.failed = append(d.failed, 0)
	}
	if at >= d.outage && d.served[i] < d.capacity {
		d.served[i]++
		d.events = append(d.events, event{At: at, Client: client, Kind: evServed})
		return http.StatusOK
	}
	d.failed[i]++
	d.events = append(d.events, event{At: at, Client: client, Kind: evFailed})
	return http.StatusServiceUnavailable
}

// leftLine logs that client's retry, which waited in its budget's line
// for waited until now, was let go (evReleased) or refused (evRefused).
func (d *dependency) leftLine(client int, waited time.Duration, kind eventKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at := d.since()
	d.events = append(d.events, event{At: at, Client: client, Kind: kind, Since: at - waited})
}

// base gives the Transports of a run their clock and their random source
// (clock.Source): the run's seeded one, drawn in the order the retries
// happen.
type base struct {
	clk   clock.Clock
	start time.Time // the run's start on clk
	rand  func() float64
}

// since returns the time since the run started.
func (b base) since() time.Duration { return b.clk.Now().Sub(b.start) }

func (b base) RetryClock() clock.Clock   { return b.clk }
func (b base) RetryRand() func() float64 { return b.rand }

// client is one client's connection to the dependency: the base of its
// Transport.
type client struct {
	base
	dep *dependency
	id  int
}

func (c client) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	code := c.dep.arrive(c.id)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode: code,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{},
		Body:    http.NoBody,
		Request: req,
	}, nil
}
