package budget

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// Wait puts a retry to host that Retry refused in line at clk.Now() and
// blocks until the budget releases it (true), or until ctx is done or until
// has passed (false); the zero until is no limit but ctx. last says that
// the retry is its request's last attempt, which probes a silent host only
// after the others (see lane.prober). A nil Budget releases it at once.
//
// The budget's own timer then drives Advance, and lets waiting retries go
// (or out at their until), on the clock of the first Wait: the Transports
// that share a budget must run on one clock (a virtual clock's sleeper is
// woken only by its own clock's Fire). rnd, a source of uniform samples in
// [0, 1), jitters the probes' silences (the first Wait's; nil: none).
func (b *Budget) Wait(clk clock.Clock, rnd func() float64, host string, ctx context.Context, until time.Time, last bool) bool {
	if b == nil {
		return true
	}
	t := &Ticket{ch: clk.Signal(), last: last}
	b.mu.Lock()
	if b.clk == nil {
		b.clk = clk
	}
	if b.rnd == nil {
		b.rnd = rnd
	}
	now := clk.Now()
	if !until.IsZero() {
		if !now.Before(until) || ctx.Err() != nil {
			b.mu.Unlock()
			return false
		}
		t.until = clock.Mono(until)
	}
	b.enqueueLocked(host, now, t)
	b.mu.Unlock()
	// No timer of its own: the budget's expires the ticket at until.
	if clk.Sleep(ctx, time.Time{}, t.ch) == clock.WokeSignal {
		return !t.expired // written before the channel was closed
	}
	return !t.Cancel() && !t.wasExpired() // released meanwhile: the retry may go
}

// wasExpired reports whether t's until took it out of line.
func (t *Ticket) wasExpired() bool {
	t.l.b.mu.Lock()
	defer t.l.b.mu.Unlock()
	return t.expired
}

// armLocked sets the budget's timer to the next time Advance is due, if
// that is earlier than it is set for. Until a Wait gives the budget a
// clock there is no timer: whoever enqueues calls Advance. Requires b.mu
// held.
func (b *Budget) armLocked() {
	if b.clk == nil {
		return
	}
	next := b.nextLocked()
	if next.IsZero() || (!b.due.IsZero() && !next.Before(b.due)) {
		return
	}
	b.due = next
	now := b.clk.Now()
	d := next.Sub(now)
	// A timer made in a testing/synctest bubble belongs to it, and stopping
	// or resetting it outside any bubble ends the program: a budget used in
	// a bubble and then outside it (a Transport shared by tests) makes a
	// new timer rather than reset the bubble's, and one whose timer was made
	// outside makes a bubble's in a bubble.
	_, real := b.clk.(clock.Real)
	inBubble := real && clock.InBubble(now)
	switch {
	case b.timer == nil:
	case b.timerBubbled && !inBubble:
		// Left alone: if its bubble still runs, it may tick once more,
		// which moves the budget as any tick does.
	case !b.timerBubbled && inBubble:
		b.timer.Stop() // (allowed in a bubble)
	default:
		b.timer.Reset(d)
		return
	}
	b.timer, b.timerBubbled = b.clk.AfterFunc(d, b.tick), inBubble
}

// tick is the budget's timer: it advances the budget and sets the timer
// again while retries wait.
func (b *Budget) tick() {
	b.mu.Lock()
	now := b.clk.Now()
	b.due = time.Time{}
	out := b.advanceLocked(now, b.expireLocked(now, nil)) // expired first: see Advance
	b.armLocked()
	b.mu.Unlock()
	for _, t := range out {
		b.fire(t)
	}
}
