// Package budget is the machinery of retryhttp.Budget: the credit that pays
// for retries, the line in which retries wait once it is spent, the
// recovery that lets the line go as a ramp, the probes that test a silent
// dependency, and the timer that drives them.
//
// Time enters every decision as a parameter (now), as in
// golang.org/x/time/rate, so a test or a simulation moves the budget by
// hand with Advance. What waits or sleeps (the timer, Wait) goes through a
// clock.Clock: the same code runs on the real clock, in testing/synctest
// and on a clock.Virtual.
//
// A nil *Budget allows every retry at no cost. A Budget is safe for
// simultaneous use; reporting a success is lock-free and allocation-free
// unless retries wait.
package budget

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// The pace of the line: how often a recovering budget adjusts its release
// rate, and how long a line of waiting retries goes without news from the
// dependency before one of them is let through to probe it.
const (
	round         = 100 * time.Millisecond
	probeAfter    = 100 * time.Millisecond // the first probe's silence: a backoff's base
	maxProbeAfter = 5 * time.Second
	lastProbe     = 2 * time.Second // the silence before a request's last attempt probes
	longOutage    = 5 * time.Second
)

// The size of the zero Budget, which retryhttp's zero Budget has too
// (retryhttp.DefaultBudgetRatio and DefaultBudgetCredit; a test there pins
// them to these).
const (
	DefaultRatio  = 0.55 // retries earned per success
	DefaultCredit = 10   // retries of credit held at most, and at the start
)

// A Budget pays for retries with credit earned by successes, and keeps the
// retries it cannot pay for in line until news of their host lets them go.
// Credit is counted in thousandths of a retry, one pool for every host; the
// lines, and the news that moves them, are the host's own (see lane), so
// that a dead host's retries never hold up a healthy one's. The zero Budget
// has the default size; Size sets another before first use.
type Budget struct {
	ratio, credit int64 // milli-retries earned per success, and held at most, when sized
	sized         bool  // set by Size; else the defaults

	spent   atomic.Int64 // milli-retries of credit spent: 0 is full
	waiting atomic.Int32 // tickets in line, of every host
	failing atomic.Int32 // lanes whose last outcome was a failure

	mu    sync.Mutex
	lanes map[string]*lane // the hosts with a line, or a recovery or probe state to keep
	order []*lane          // lanes in the order they were made, oldest first: for the bound
	clk   clock.Clock      // the clock of the first Wait; nil until then: see armLocked
	rnd   func() float64   // the first Wait's source of jitter; nil: none (see lane.stretch)
	timer clock.Timer      // calls tick while retries wait; nil until first needed
	// timerBubbled: timer was made in a testing/synctest bubble (see
	// armLocked).
	timerBubbled bool
	due          time.Time // when timer fires; zero when stopped
	exp          expiries  // the tickets in line with an until, soonest first
	// releases holds what Enqueue's tickets call when they go (Wait's
	// fire a channel instead: a ticket in line holds no function).
	releases map[*Ticket]func()
}

// New returns a budget of the size that Size sets.
func New(ratio float64, credit int) *Budget {
	b := new(Budget)
	b.Size(ratio, credit)
	return b
}

// Size makes b hold up to credit retries (and start with them all) and earn
// ratio of a retry for each success. A ratio below zero (or NaN) counts as
// zero, above 1000 as 1000; a credit below zero counts as zero, above a
// million as a million. It must be called before b's first use, if at all.
func (b *Budget) Size(ratio float64, credit int) {
	if !(ratio > 0) {
		ratio = 0
	}
	ratio = min(ratio, 1000)
	credit = min(max(credit, 0), 1_000_000)
	b.ratio, b.credit, b.sized = int64(math.Round(ratio*1000)), int64(credit)*1000, true
}

// size returns the budget's parameters in milli-retries: those that Size
// set, or the defaults.
func (b *Budget) size() (ratio, credit int64) {
	if !b.sized {
		return DefaultRatio * 1000, DefaultCredit * 1000
	}
	return b.ratio, b.credit
}

// Params returns the budget's ratio and credit: those that Size set, or the
// defaults.
func (b *Budget) Params() (ratio float64, credit int) {
	r, c := b.size()
	return float64(r) / 1000, int(c / 1000)
}

// Retry asks for one retry to host at now and reports whether the credit
// pays for it, spending one retry of credit if so. It refuses while other
// retries to host wait in line, and while host is down (its last outcome
// outcomes failed): a refused retry may Enqueue (or Wait).
func (b *Budget) Retry(host string, now time.Time) bool {
	if b == nil {
		return true
	}
	if (b.waiting.Load() > 0 || b.failing.Load() > 0) && b.heldAt(host) {
		return false
	}
	return b.spend()
}

// spend spends one retry of credit if there is that much, and reports
// whether it did.
func (b *Budget) spend() bool {
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

// Refund gives back a retry that Retry granted but that was never sent.
func (b *Budget) Refund() {
	if b == nil {
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

// Success reports an attempt to host at now whose outcome is not retried:
// the host answered. attempt is the attempt's number, 1 for a request's
// first. It earns credit and ends the host's run of failures; while
// retries to host wait it starts a recovery (any attempt) or feeds one (a
// retry: the recovery grows with the successes of the retries it lets
// through, not with the client's other traffic), and lets one of them go if
// the credit pays for it.
func (b *Budget) Success(host string, now time.Time, attempt int) {
	if b.earned() {
		b.recover(host, now, attempt)
	}
}

// Succeeded is Success at clk.Now(), read only when retries wait or a host
// failed last: otherwise it is lock-free and allocation-free, and reads no
// clock.
func (b *Budget) Succeeded(clk clock.Clock, host string, attempt int) {
	if b.earned() {
		b.recover(host, clk.Now(), attempt)
	}
}

// earned earns a success's credit and reports whether the success is news
// to a lane: retries wait, or a host's last outcome was a failure. A nil
// Budget earns nothing and has no lanes.
func (b *Budget) earned() bool {
	if b == nil {
		return false
	}
	ratio, _ := b.size()
	b.earn(ratio)
	return b.waiting.Load() > 0 || b.failing.Load() > 0
}

// recover is the news of a success at host at now (see earned).
func (b *Budget) recover(host string, now time.Time, attempt int) {
	b.mu.Lock()
	expired := b.expireLocked(now, nil) // (not paid for past its until)
	paid := b.recoverLocked(host, now, attempt)
	b.mu.Unlock()
	for _, t := range expired {
		b.fire(t)
	}
	if paid != nil {
		b.fire(paid)
	}
}

// recoverLocked is recover; it returns a waiting retry that the credit now
// pays for, for the caller to release. Requires b.mu held.
func (b *Budget) recoverLocked(host string, now time.Time, attempt int) (paid *Ticket) {
	l := b.lanes[laneKey(host)]
	if l == nil {
		return nil // no retry to host waits, nor did it fail last
	}
	b.upLocked(l)
	l.probe = 0
	l.stretch = b.draw()
	if len(l.line) == 0 {
		l.upAt = now
		return nil
	}
	if now.Sub(l.upAt) > longOutage {
		l.gentle = true // no success for long: the ramp alone lets the line go
	}
	l.upAt = now
	l.news(now)
	switch {
	case !l.rec.on:
		allowed := 2
		if l.gentle {
			allowed = 1 // a long outage: start gently (see advanceLocked)
		}
		l.rec = recovery{on: true, start: now, allowed: allowed}
	case attempt > 1:
		l.rec.succ++
	default:
		l.rec.first++
	}
	// The host answers: besides the recovery's ramp, each success lets one
	// waiting retry go if the credit pays for it, so that the retries of a
	// host failing part of its attempts (resets, a brownout) go as fast as
	// they are earned, no faster than its successes.
	if !l.gentle && b.spend() {
		paid = b.popLocked(l, 0)
	}
	b.armLocked()
	return paid
}

// draw returns a stretch of a probe's silence: uniform in [1, 2), or 1
// without a source of jitter. Requires b.mu held.
func (b *Budget) draw() float64 {
	if b.rnd == nil {
		return 1
	}
	return 1 + b.rnd()
}

// upLocked marks l's host up. Requires b.mu held.
func (b *Budget) upLocked(l *lane) {
	if l.down {
		l.down = false
		b.failing.Add(-1)
	}
}

// Failure reports an attempt to host at now whose outcome is retried: the
// host failed it (or did not answer). It makes the host down until its next
// success: its retries wait in line, for a probe or for news of its return,
// instead of spending their attempts. (A
// server's answer that says when to come back, Retry-After, is no sign of
// an outage; the caller does not report it.)
func (b *Budget) Failure(host string, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	l := b.laneLocked(host, now)
	l.news(now)
	if !l.down {
		l.down = true
		b.failing.Add(1)
	}
	if l.rec.on {
		l.rec.fail++
	}
	b.mu.Unlock()
}

// heldAt reports whether a retry to host must wait in line: others wait,
// or the host is down.
func (b *Budget) heldAt(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lanes[laneKey(host)]
	return l != nil && (len(l.line) > 0 || l.down)
}
