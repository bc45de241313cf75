package main

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// The program runs real retryhttp.Transports on a virtual clock. These
// tests run the same herds through the same Transports on the real clock,
// inside testing/synctest (fake time that moves when every goroutine of the
// bubble waits), and compare: the virtual clock must not change what the
// Transports do.
//
// Exact agreement, to the nanosecond, holds when no two timers (an
// attempt's wait, a budget's timer, a wait in line's end) fire at one
// instant, which the virtual clock counts (result.Ties), and no success
// lets several retries in line go at once, which the replay of the lines
// counts (replay.Several): each instant then wakes one goroutine, and
// those it wakes in turn wait for it, so the dependency's capacity, the
// budgets and the shared random source see everything in the same order
// on both clocks; the runs then agree on every arrival, every wait in line
// and every outcome (result.Events included). Full and equal jitter draw
// their waits to the nanosecond and, in the scenarios with spread first
// requests, never meet the first case; a test checks it, and that some of
// their runs meet neither.
//
// A success lets go as many retries in line as the credit pays for, and
// wakes them all at its instant: the virtual clock runs them in the order
// the line let them go, the real clock in any order. Those whose backoff
// is over (most, after a wait in line longer than it) are sent at once,
// and race for what is left of the 10 ms's capacity and for the random
// source's next draws: which of them the dependency fails, and so which
// wait again, differs. Most budgeted runs meet that once at least:
// the first success after the outage finds the credit the probes left
// (each spends one of the 10 it starts with, and a silence refills it).
//
// When timers do fire at one instant, the virtual clock runs them in the
// order they were set and synctest in any order: which client meets the
// last slot of capacity or the last retry of credit, which sample it draws,
// whether a probe or a retry comes first. Since the line's probes lost
// their jitter, such ties are more frequent: a probe goes exactly its pace
// (the longest wait of the head's backoff, a round figure) after the last
// news, so it meets a retry whose wait is no draw either, counted from the
// same grid of news. Without jitter, every wait is a round multiple of
// 100 ms; with decorrelated jitter, a wait that reaches the cap is the cap,
// which a probe paced from the same news may meet; and first requests all
// sent at one instant start in any order. Then the runs agree in aggregate
// only, as they do after a success that lets several go: every client
// ends once; the attempts per client within 10 %; the busiest 10 ms once
// the dependency is back within the dependency's capacity per 10 ms (a
// herd would be many times that); and the clients served within that
// capacity for each tie or success that lets several go (at least 1: a
// client whose attempt a tie leaves to fail on a full slot, with no other
// request in flight on its budget and the credit spent, is refused at
// once).
//
// That last bound is wider than it was (1 % of the clients) because the
// line now decides a crowd's fate at once. A retry whose time in line
// ends goes only if the dependency answered last, and a request's time in
// line ends with its schedule: its start plus its policy's longest waits.
// So the requests of a herd, which start within its spread, all reach that
// end together, and what the dependency did last then decides for every
// retry still in line: let go, they are served until a 10 ms slot is full
// and the next fails, after which the rest are refused; or all refused. A
// tie before that end, by moving when a chain of releases ran and so what
// came last, can move the clients served by about a slot's capacity; so
// can a race among the retries one success let go, which changes which of
// them wait again. While a success let one retry go at most (the line's
// rule before), the runs with ties, run with their tied timers in random
// orders (a copy of the virtual clock, 600 orders of each herd), served one
// or two slots' capacity fewer or more than the virtual clock's order,
// never more, with 1 to 7 ties: 19 or 20 of the program's 1000 clients (20
// a slot), 5 or 10 of 200 (5 a slot); attempts per client moved by under
// 2 %, the busiest 10 ms by 2 at most. Now that a success lets go what the
// credit pays for, the same copy, running every instant's events in random
// orders (600 orders of each herd with ties or a success that lets several
// go), served as many clients as the virtual clock's order, with as many
// attempts, in every run, the busiest 10 ms moved by 1 at most; 40 runs of
// each on the real clock, in synctest, served 2 more at most.

// programHerd is the herd the program shows by default. It runs with
// retryhttp's budget only: the others take seconds under the race detector
// and the smaller herds cover them.
const programHerd = "the program's herd"

// transportScenarios are the herds run on both clocks.
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

func TestTheVirtualClockRunsTheTransportsAsTheRealOne(t *testing.T) {
	exact, approx := 0, 0
	for name, sc := range transportScenarios() {
		for _, s := range strategies(100*time.Millisecond, 2*time.Second) {
			if name == programHerd && s.Budget != inLine {
				continue
			}
			t.Run(name+"/"+s.Name, func(t *testing.T) {
				want := simulate(sc, s)
				several := 0 // successes that let several retries go at once
				if s.Budget == inLine {
					several = replayLines(want, sc, s.Backoff).Several
				}
				var got *result
				synctest.Test(t, func(t *testing.T) { got = onTheRealClock(sc, s) })

				if want.Ties == 0 && several == 0 {
					exact++
					assert.Equal(t, want.Clients, got.Clients, "each client's attempt instants and outcome")
					assert.Equal(t, withoutTies(want), got, "arrivals per slot and totals")
					return
				}
				approx++
				assert.Equal(t, sc.Clients, got.Succeeded+got.Exhausted+got.BudgetRefusals, "every client ends once")
				assert.InDelta(t, want.Succeeded, got.Succeeded, float64(max(1, sc.Capacity*(want.Ties+several))), "clients served")
				assert.InDelta(t, want.PerClient(), got.PerClient(), 0.1*want.PerClient(), "attempts per client")
				assert.InDelta(t, want.Peak(sc.Outage), got.Peak(sc.Outage), float64(sc.Capacity), "busiest 10 ms once up")
			})
		}
	}
	// Both kinds of comparison ran: the scenarios are not all of one kind.
	assert.Positive(t, exact, "exact comparisons")
	assert.Positive(t, approx, "comparisons of aggregates")
}

// The exact comparisons cover the budget: in the scenarios with spread
// first requests, every budgeted run of full and equal jitter puts no two
// timers on one instant, their waits drawn to the nanosecond, and in some
// of them (the long outage's, the program's herd's) no success lets
// several retries go at once either: those runs, whose retries wait in
// line and are let go by successes, as probes and at the end of their time
// in line, are compared exactly. Decorrelated jitter's are not: in each of
// these scenarios some success of its runs lets several go.
func TestTheExactComparisonsCoverTheBudget(t *testing.T) {
	exact := map[string]int{}      // budgeted runs compared exactly, by backoff
	rules := map[releaseRule]int{} // their releases, by rule
	for name, sc := range transportScenarios() {
		if sc.Spread == 0 {
			continue
		}
		for _, s := range strategies(100*time.Millisecond, 2*time.Second) {
			if s.Budget != inLine || s.BackoffName == "no jitter" {
				continue
			}
			r := simulate(sc, s)
			rp := replayLines(r, sc, s.Backoff)
			if s.BackoffName != "decorrelated" {
				assert.Zero(t, r.Ties, "%s/%s", name, s.Name)
			}
			assert.Positive(t, r.BudgetWaits, "%s/%s: retries waited in line", name, s.Name)
			if r.Ties == 0 && rp.Several == 0 {
				exact[s.BackoffName]++
				for _, rel := range rp.Releases {
					rules[rel.By]++
				}
			}
		}
	}
	assert.Positive(t, exact["full jitter"], "full jitter's budget, compared exactly")
	assert.Positive(t, exact["equal jitter"], "equal jitter's budget, compared exactly")
	assert.Positive(t, rules[bySuccess], "retries let go by a success, compared exactly")
	assert.Positive(t, rules[byProbe], "retries let go as probes, compared exactly")
	assert.Positive(t, rules[byTimesEnd], "retries let go at the end of their time in line, compared exactly")
}

// withoutTies returns r without the count of simultaneous timers, which
// only the virtual clock reports.
func withoutTies(r *result) *result {
	c := *r
	c.Ties = 0
	return &c
}

// onTheRealClock runs scenario sc with strategy s as simulate does, on the
// real clock: inside a synctest bubble, each client on a goroutine of its
// own that sleeps until its start.
func onTheRealClock(sc scenario, s strategy) *result {
	rng := newRand(sc.Seed)
	starts := startTimes(sc, rng)
	var mu sync.Mutex
	b := base{clk: clock.Real{}, start: time.Now(), rand: func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64()
	}}
	dep := newDependency(sc, b)
	var wg sync.WaitGroup
	runs := runClients(sc, s, dep, b, func(at time.Duration, f func()) {
		wg.Go(func() {
			time.Sleep(at)
			f()
		})
	}, starts)
	wg.Wait()
	return runs.result(sc, s, dep)
}
