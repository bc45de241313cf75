package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/clock"

	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the budget a Transport makes when its Budget is nil, and of
// the zero Budget.
const (
	DefaultBudgetRatio  = 0.2 // retries earned per success
	DefaultBudgetCredit = 10  // retries of credit held at most, and at the start
)

// The budget's clock: how often a recovering budget adjusts its release
// rate, and how long a line of waiting retries goes without news from the
// dependency before one of them is let through to probe it.
const (
	budgetRound        = 100 * time.Millisecond
	budgetProbeIdle    = time.Second
	budgetMaxProbeIdle = 32 * time.Second
	budgetLongOutage   = 5 * time.Second
)

// A Budget bounds the retries of every request that shares it, so that an
// outage does not multiply the load on a failing dependency, and lets the
// retries through again as soon as the dependency is back.
//
// Retries are paid with credit, and credit is earned by successes, not by
// time: a Budget holds up to DefaultBudgetCredit retries of credit (it
// starts full), each retry spends one, and each success (an attempt whose
// outcome is not retried) earns back DefaultBudgetRatio of one. A client
// whose failures are sparse never runs out; one whose dependency is down
// spends its credit once and then earns none, so the dependency sees
// hardly more than the first attempts, for one client as for a fleet.
//
// A retry that finds the credit spent waits in line, within its request's
// deadline and the time its own backoff schedule would have taken, instead
// of failing at once. The line is let through by news of the dependency:
//   - A success starts a recovery, which releases waiting retries in
//     rounds of 100 ms, evenly spread over each round: 2 in the first (1
//     after a long outage),
//     then twice the retries that succeeded in the round before while no
//     attempt failed in it (slow start), half of them once some did, and
//     none once no retry succeeded (the recovery ends). A released retry
//     then waits its own backoff, so the releases of a round reach the
//     dependency spread out, and the ramp is paced by the dependency's
//     answers, not by the client's other traffic. After a long outage
//     (retries have waited for over 5 s), a recovery starts with 1 release,
//     and a round releases no more retries than half the first attempts
//     that succeeded in the round before (at least 1): a dependency just
//     back meets little more than the client's own load.
//   - While no outcome at all is reported for a second, the retry at the
//     head of the line goes through as a probe. Each probe doubles the
//     silence the next one needs, up to 32 s, until a success. A client
//     that keeps sending never probes: its first attempts tell.
//
// So a recovering dependency meets a ramp, not a herd, and every caller
// still waiting when it is back is served.
//
// The zero Budget has the default size. A Budget is safe for simultaneous
// use; reporting a success is lock-free and allocation-free unless retries
// are waiting. Time enters its methods as a parameter: pass time.Now(),
// whose monotonic reading keeps the budget's rounds true across steps of the
// wall clock. A Transport drives its budget with a timer of its own; other
// clients, and simulations with a virtual clock, call Advance.
type Budget struct {
	ratio, credit int64 // milli-retries, when sized
	sized         bool  // made by NewBudget; else the defaults
	unlimited     bool

	spent   atomic.Int64 // milli-retries of credit spent: 0 is full
	waiting atomic.Int32 // tickets in line
	active  atomic.Int64 // the last news, on the monotonic scale (clock.Mono): see advanceLocked

	mu     sync.Mutex
	line   []*BudgetTicket // FIFO
	since  time.Time       // when the line last formed
	rec    recovery
	probe  time.Duration // the silence the next probe needs; 0: budgetProbeIdle
	driven bool          // a Transport waits on the budget: its timer calls Advance
	timer  *time.Timer   // calls Advance for Transports; nil until first needed
	due    time.Time     // when timer fires; zero when stopped
}

// recovery is the state of a recovering budget. Requires Budget.mu held.
type recovery struct {
	on                bool
	start             time.Time // the current round's start
	allowed, released int       // releases allowed and made in this round
	succ, fail        int       // retries that succeeded, attempts that failed, in this round
	first             int       // first attempts that succeeded in this round
}

// A BudgetTicket is a retry waiting in a Budget's line.
type BudgetTicket struct {
	b       *Budget
	release func()
	done    bool // released or canceled; requires b.mu held
}

// NewBudget returns a budget that holds up to credit retries (and starts
// with them all) and earns ratio of a retry for each success. A ratio
// below zero (or NaN) counts as zero, above 1000 as 1000; a credit below
// zero counts as zero, above a million as a million. With no credit, every
// retry waits in line for news of the dependency.
func NewBudget(ratio float64, credit int) *Budget {
	if !(ratio > 0) {
		ratio = 0
	}
	ratio = min(ratio, 1000)
	credit = min(max(credit, 0), 1_000_000)
	return &Budget{ratio: int64(math.Round(ratio * 1000)), credit: int64(credit) * 1000, sized: true}
}

// UnlimitedBudget returns a budget that allows every retry: set it as
// Transport.Budget to turn budgeting off.
func UnlimitedBudget() *Budget { return &Budget{unlimited: true} }

// size returns the budget's parameters in milli-retries: those of
// NewBudget, or the defaults for a zero Budget.
func (b *Budget) size() (ratio, credit int64) {
	if !b.sized {
		return DefaultBudgetRatio * 1000, DefaultBudgetCredit * 1000
	}
	return b.ratio, b.credit
}

// Retry asks for one retry at now and reports whether the credit pays for
// it, spending one retry of credit if so. It refuses while other retries
// wait in line: a refused retry may Enqueue.
func (b *Budget) Retry(now time.Time) bool {
	if b == nil || b.unlimited {
		return true
	}
	if b.waiting.Load() > 0 {
		return false
	}
	_, credit := b.size()
	for {
		s := b.spent.Load()
		if s+1000 > credit {
			return false
		}
		if b.spent.CompareAndSwap(s, s+1000) {
			return true
		}
	}
}

// refund gives back a retry that Retry granted but that was never sent
// (its caller gave up during the wait before it).
func (b *Budget) refund() {
	if b == nil || b.unlimited {
		return
	}
	b.earn(1000)
}

// earn adds m milli-retries of credit, up to the budget's credit.
func (b *Budget) earn(m int64) {
	for {
		s := b.spent.Load()
		if s == 0 || m == 0 {
			return
		}
		if b.spent.CompareAndSwap(s, max(s-m, 0)) {
			return
		}
	}
}

// Success reports an attempt at now whose outcome is not retried: the
// dependency answered. attempt is the attempt's number, 1 for a request's
// first. It earns credit, and while retries wait it starts a recovery (any
// attempt) or feeds one (a retry: the recovery grows with the successes of
// the retries it lets through, not with the client's other traffic).
func (b *Budget) Success(now time.Time, attempt int) {
	if b == nil || b.unlimited {
		return
	}
	ratio, _ := b.size()
	b.earn(ratio)
	if b.waiting.Load() == 0 {
		return
	}
	b.news(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probe = 0
	switch {
	case !b.rec.on:
		allowed := 2
		if now.Sub(b.since) > budgetLongOutage {
			allowed = 1 // a long outage: start gently (see advanceLocked)
		}
		b.rec = recovery{on: true, start: now, allowed: allowed}
	case attempt > 1:
		b.rec.succ++
	default:
		b.rec.first++
	}
	b.armLocked()
}

// succeeded is Success for the Transport: no clock is read unless retries
// wait.
func (b *Budget) succeeded(clk clock.Clock, attempt int) {
	if b == nil || b.unlimited {
		return
	}
	if b.waiting.Load() == 0 {
		ratio, _ := b.size()
		b.earn(ratio)
		return
	}
	b.Success(clk.Now(), attempt)
}

func (b *Budget) retry(now time.Time) bool { return b.Retry(now) }
func (b *Budget) failure(now time.Time)    { b.Failure(now) }

// Failure reports an attempt at now whose outcome is retried: the
// dependency failed it (or did not answer).
func (b *Budget) Failure(now time.Time) {
	if b == nil || b.unlimited {
		return
	}
	b.news(now)
	if b.waiting.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.rec.on {
		b.rec.fail++
	}
	b.mu.Unlock()
}

// Enqueue puts a retry that Retry refused in line at now. release is called
// once, from Advance, when the budget lets the retry go; it must not call
// the Budget. Cancel takes a ticket out of line.
func (b *Budget) Enqueue(now time.Time, release func()) *BudgetTicket {
	t := &BudgetTicket{b: b, release: release}
	if b == nil || b.unlimited {
		t.done = true
		release()
		return t
	}
	b.mu.Lock()
	if len(b.line) == 0 {
		b.news(now) // the silence a probe needs counts from the line's start at the earliest
		b.since = now
	}
	b.line = append(b.line, t)
	b.waiting.Add(1)
	b.armLocked()
	b.mu.Unlock()
	return t
}

// Cancel takes t out of line. It reports false if t was already released
// (or canceled): the retry may then go, or its release is wasted.
func (t *BudgetTicket) Cancel() bool {
	b := t.b
	if b == nil || b.unlimited {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	for i, u := range b.line {
		if u == t {
			b.line = append(b.line[:i], b.line[i+1:]...)
			break
		}
	}
	b.waiting.Add(-1)
	return true
}

// Advance releases the retries that are due at now and returns when it is
// next to be called (the zero Time when no retry waits).
func (b *Budget) Advance(now time.Time) (next time.Time) {
	if b == nil || b.unlimited {
		return time.Time{}
	}
	b.mu.Lock()
	released := b.advanceLocked(now)
	next = b.nextLocked()
	b.mu.Unlock()
	for _, t := range released {
		t.release()
	}
	return next
}

// advanceLocked moves the budget to now and takes the retries due out of
// line. Requires b.mu held.
func (b *Budget) advanceLocked(now time.Time) []*BudgetTicket {
	r := &b.rec
	for r.on && !now.Before(r.start.Add(budgetRound)) {
		// A new round: its allowance follows the last one's outcomes.
		next := recovery{on: true, start: r.start.Add(budgetRound)}
		switch {
		case r.succ == 0:
			next = recovery{} // no retry succeeded: back to probing
		case r.fail == 0:
			next.allowed = 2 * r.succ
		default:
			next.allowed = max(r.succ/2, 1)
		}
		if r.first > 0 && next.start.Sub(b.since) > budgetLongOutage {
			// After a long outage, released retries add at most half again
			// the load the client's own traffic puts on the dependency.
			next.allowed = min(next.allowed, max(r.first/2, 1))
		}
		*r = next
	}
	var out []*BudgetTicket
	if r.on {
		for len(b.line) > 0 && r.released < r.allowed && !now.Before(b.releaseAt()) {
			out = append(out, b.popLocked())
			r.released++
		}
	} else if len(b.line) > 0 && clock.Mono(now) >= b.active.Load()+int64(b.probeIdle()) {
		out = append(out, b.popLocked())
		b.news(now) // the probe's own time counts as news
		b.probe = min(2*b.probeIdle(), budgetMaxProbeIdle)
	}
	return out
}

// releaseAt returns when the next release of the round is due: the
// round's releases are spread evenly over it. Requires b.mu held.
func (b *Budget) releaseAt() time.Time {
	r := &b.rec
	return r.start.Add(time.Duration(int64(budgetRound) * int64(r.released) / int64(r.allowed)))
}

// nextLocked returns when Advance is next due. Requires b.mu held.
func (b *Budget) nextLocked() time.Time {
	if len(b.line) == 0 {
		return time.Time{}
	}
	r := &b.rec
	if r.on {
		if r.released < r.allowed {
			return b.releaseAt()
		}
		return r.start.Add(budgetRound)
	}
	return clock.FromMono(b.active.Load() + int64(b.probeIdle()))
}

// probeIdle returns the silence the next probe needs. Requires b.mu held.
func (b *Budget) probeIdle() time.Duration {
	if b.probe == 0 {
		return budgetProbeIdle
	}
	return b.probe
}

func (b *Budget) popLocked() *BudgetTicket {
	t := b.line[0]
	b.line[0] = nil
	b.line = b.line[1:]
	t.done = true
	b.waiting.Add(-1)
	return t
}

// news records that the budget heard of the dependency at now (or of a
// line forming): the last such time starts the silence before a probe.
func (b *Budget) news(now time.Time) {
	c := clock.Mono(now)
	for {
		old := b.active.Load()
		if old >= c || b.active.CompareAndSwap(old, c) {
			return
		}
	}
}

// armLocked sets the budget's timer, which drives Advance for the
// Transports that share the budget, to the next time it is due. Requires
// b.mu held.
func (b *Budget) armLocked() {
	if !b.driven {
		return
	}
	next := b.nextLocked()
	if next.IsZero() || (!b.due.IsZero() && !next.Before(b.due)) {
		return
	}
	b.due = next
	d := time.Until(next)
	if b.timer == nil {
		b.timer = time.AfterFunc(d, b.tick)
	} else {
		b.timer.Reset(d)
	}
}

// tick is the budget's timer: it advances the budget and sets the timer
// again while retries wait.
func (b *Budget) tick() {
	now := time.Now()
	b.mu.Lock()
	b.due = time.Time{}
	released := b.advanceLocked(now)
	b.armLocked()
	b.mu.Unlock()
	for _, t := range released {
		t.release()
	}
}

// wait puts a retry in line and blocks until the budget releases it
// (true), or until ctx is done or until passes (false).
func (b *Budget) wait(clk clock.Clock, ctx context.Context, until time.Time) bool {
	ready := make(chan struct{})
	b.mu.Lock()
	b.driven = true
	b.mu.Unlock()
	t := b.Enqueue(time.Now(), func() { close(ready) })
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
	case <-timer.C:
	}
	return !t.Cancel()
}
