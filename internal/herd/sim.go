package main

import (
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
)

// slot is the dependency's accounting period: it serves at most Capacity
// requests per slot and fails the rest with 503.
const slot = 10 * time.Millisecond

// origin is where the virtual clock starts. Only differences matter; a fixed
// instant keeps every run identical.
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

// A budgetKind is what stands between a failed attempt and its retry.
type budgetKind uint8

const (
	noBudget budgetKind = iota // every retry goes after its backoff: UnlimitedBudget
	inLine                     // retryhttp's Budget: a retry after another client's failure (or once the credit is spent) waits in line for a probe or the dependency's successes
)

func (k budgetKind) String() string {
	if k == inLine {
		return "retryhttp budget"
	}
	return "no budget"
}

// A strategy is a way of retrying: one of retryhttp's backoffs, with or
// without a budget.
type strategy struct {
	Name        string // BackoffName, and the budget if any
	BackoffName string
	Backoff     retryhttp.Backoff
	Budget      budgetKind
}

// newStrategy returns the strategy of backoff b, named name, with budget k.
func newStrategy(name string, b retryhttp.Backoff, k budgetKind) strategy {
	s := strategy{Name: name, Backoff: b, Budget: k, BackoffName: name}
	if k != noBudget {
		s.Name += " + " + k.String()
	}
	return s
}

// noJitter waits min(Cap, Base*2^n): exponential backoff without jitter,
// the strategy that makes a herd (retryhttp offers only jittered ones).
type noJitter struct{ Base, Cap time.Duration }

// Delay returns min(Cap, Base*2^n).
func (e noJitter) Delay(n int, _ time.Duration, _ float64) time.Duration {
	d := e.Base
	for ; n > 0 && d < e.Cap; n-- {
		d *= 2
	}
	return min(d, e.Cap)
}

// strategies returns the strategies compared, in display order: each
// backoff without a budget and with retryhttp's budget.
func strategies(base, cap time.Duration) []strategy {
	backoffs := []struct {
		name string
		b    retryhttp.Backoff
	}{
		{"no jitter", noJitter{Base: base, Cap: cap}},
		{"full jitter", retryhttp.FullJitter{Base: base, Cap: cap}},
		{"equal jitter", retryhttp.EqualJitter{Base: base, Cap: cap}},
		{"decorrelated", retryhttp.DecorrelatedJitter{Base: base, Cap: cap}},
	}
	var out []strategy
	for _, b := range backoffs {
		for _, k := range []budgetKind{noBudget, inLine} {
			out = append(out, newStrategy(b.name, b.b, k))
		}
	}
	return out
}

// A result is what one strategy did to the dependency.
type result struct {
	Strategy strategy

	// Served and Failed count arrivals at the dependency per slot: slot i
	// covers [i*slot, (i+1)*slot). Failed includes the outage's failures.
	Served, Failed []int

	// GaveUp counts the clients that ended without success, per slot;
	// InLine is the most retries waiting in the budgets' lines at once
	// during each slot.
	GaveUp, InLine []int

	Attempts       int           // attempts sent, first ones included
	Succeeded      int           // clients that got a response
	Exhausted      int           // clients that used MaxAttempts and failed
	BudgetRefusals int           // clients whose retry the budget did not let go
	BudgetWaits    int           // retries the budget's line held, then let go
	LastSuccess    time.Duration // when the last successful client succeeded
	LastEnd        time.Duration // when the last client succeeded or gave up

	// Clients holds each client's run, in client order.
	Clients []clientRun

	// Events lists every arrival at the dependency and every end of a wait
	// in a budget's line, in the order they happened: what the tests of the
	// line read its rules in.
	Events []event

	// Ties counts the instants at which two timers of the Transports (an
	// attempt's, a budget's, the end of a wait in line) fire together: only
	// there can the order of events, which the virtual clock takes from the
	// order they were set in, differ from the real clock's (clock.Virtual.Ties).
	Ties int
}

// A clientRun is one client's logical request: when each of its attempts
// reached the dependency, and how it ended.
type clientRun struct {
	Arrivals []time.Duration
	End      outcome
}

// An event is an attempt's arrival at the dependency, or the end of a
// retry's wait in its budget's line.
type event struct {
	At     time.Duration
	Client int
	Kind   eventKind
	Since  time.Duration // for the end of a wait: when the retry joined the line
}

// An eventKind says what an event is.
type eventKind uint8

const (
	evFailed   eventKind = iota // an attempt the dependency failed
	evServed                    // an attempt it served
	evReleased                  // a retry its line let go: it is sent at the end of its backoff
	evRefused                   // a retry its line refused: its request ends
)

// An outcome is how a client's logical request ended.
type outcome uint8

const (
	pending      outcome = iota // not ended yet
	served                      // an attempt was served
	exhausted                   // MaxAttempts attempts failed
	budgetDenied                // the budget did not let a retry go
)

// Peak returns the most arrivals in one slot that starts at or after from.
func (r *result) Peak(from time.Duration) int {
	peak := 0
	for i := int((from + slot - 1) / slot); i < len(r.Served); i++ {
		peak = max(peak, r.Served[i]+r.Failed[i])
	}
	return peak
}

// WhileDown returns the arrivals during an outage of the given length.
func (r *result) WhileDown(outage time.Duration) int {
	n := 0
	for i := 0; i < len(r.Served) && time.Duration(i)*slot < outage; i++ {
		n += r.Served[i] + r.Failed[i]
	}
	return n
}

// Unfinished returns how many clients never succeeded.
func (r *result) Unfinished() int { return r.Exhausted + r.BudgetRefusals }

// PerClient returns the attempts per client.
func (r *result) PerClient() float64 { return float64(r.Attempts) / float64(len(r.Clients)) }

// newRand returns the run's random source for a seed. A run draws the
// clients' start times from it first, then, in the order they happen, one
// sample per retry (its backoff's), as a Transport shared by the clients
// would. The budget's line draws nothing: its probes go at their pace.
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
