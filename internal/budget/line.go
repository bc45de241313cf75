package budget

import (
	"context"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A host's line holds the retries that Retry told to wait: another request
// failed the host lately, or its credit is spent, and other requests to it
// are in flight. What lets them go, oldest first:
//   - a success of the host: it lets go as many as the credit then pays
//     for, each spending one. A retry let go that succeeds gives its retry
//     back (see Success) and lets the next go, so a host that responds draws
//     its line out at the pace of its successes, at most the credit's worth
//     in flight at once, and one that fails stops it;
//   - a silence: with nothing heard of the host (no outcome reported, and no
//     retry let go) for the longest wait the head's own backoff could draw
//     (at least minProbe), the head goes as a probe, spending one if there
//     is one. A probe goes about when its own policy would have sent it, so
//     the line never sends retries faster than their policies; letting a
//     probe go counts as hearing of the host;
//   - the end of its time in line (Wait's until: its request's schedule,
//     or just before its deadline): it goes if the host's last outcome was a
//     success, for the line held it only while the host responded, and is
//     refused otherwise.
const minProbe = time.Millisecond

// A Ticket is a retry waiting in an account's line.
type Ticket struct {
	pace  time.Duration // the silence after which it probes, at the head
	clk   clock.Clock   // its waiter's
	ch    chan struct{} // fired to wake its waiter (clk.Fire): let go, or to look again
	done  bool          // out of line: let go or canceled
	letGo bool          // let go by the line
	paid  bool          // it spent a retry of credit as it was let go
}

// Wait puts a retry to the account's host in line at clk.Now() and blocks
// until the line lets it go (letGo), until ctx is done, or until until has
// passed, then or at once (its time is up: see timeUpLocked); the zero
// until is no limit but ctx. pace is the longest wait the
// retry's backoff could draw: at the head of the line, the retry goes as a
// probe after a silence that long. paid reports whether it spent a retry of
// credit as it was let go. A nil Account lets the retry go at once, paid.
func (acc *Account) Wait(clk clock.Clock, ctx context.Context, until time.Time, pace time.Duration) (letGo, paid bool) {
	if acc == nil {
		return true, true
	}
	b := acc.b
	t := &Ticket{pace: max(pace, minProbe), clk: clk, ch: clk.Signal()}
	b.mu.Lock()
	now := clk.Now()
	if ctx.Err() != nil {
		b.mu.Unlock()
		return false, false
	}
	if len(acc.line) == 0 {
		acc.lastHeard = max(acc.lastHeard, clock.Mono(now)) // a probe's silence counts from the line's start
	}
	acc.line = append(acc.line, t)
	acc.waiting.Add(1)
	for !t.done {
		due := until
		if acc.line[0] == t {
			if probe := acc.probeAt(); due.IsZero() || probe.Before(due) {
				due = probe
			}
		}
		b.mu.Unlock()
		woke := clk.Sleep(ctx, due, t.ch)
		now := clk.Now()
		b.mu.Lock()
		switch {
		case t.done:
		case woke == clock.WokeContext:
			acc.popLocked(slices.Index(acc.line, t))
		case !until.IsZero() && !now.Before(until):
			acc.timeUpLocked(now, t)
		case acc.line[0] == t && !now.Before(acc.probeAt()):
			acc.letGoLocked(now, 0)
		}
	}
	b.mu.Unlock()
	return t.letGo, t.paid
}

// probeAt returns when the head of the line goes as a probe. Requires b.mu
// held and a line.
func (acc *Account) probeAt() time.Time {
	return clock.FromMono(acc.lastHeard + int64(acc.line[0].pace))
}

// timeUpLocked takes t out of line when its time in line is up: it goes if
// the host's last outcome was a success, and is refused otherwise. Requires
// b.mu held.
func (acc *Account) timeUpLocked(now time.Time, t *Ticket) {
	i := slices.Index(acc.line, t)
	if acc.failing.Load() {
		acc.popLocked(i)
		return
	}
	acc.letGoLocked(now, i)
}

// recover records a success of the host at now (see Success): the host is
// up, earlier failures hold no retry back, and the oldest retries in line
// go, as many as the credit pays for.
func (acc *Account) recover(now time.Time) {
	b := acc.b
	b.mu.Lock()
	defer b.mu.Unlock()
	acc.failing.Store(false)
	acc.fails = [2]failure{}
	acc.lastHeard = max(acc.lastHeard, clock.Mono(now))
	for len(acc.line) > 0 && acc.spendLocked(now) {
		acc.line[0].paid = true
		acc.letGoLocked(now, 0)
	}
}

// letGoLocked takes the i-th ticket out of line and lets its retry go,
// spending a retry of credit if there is one (unless it is paid already).
// The next probe waits its silence from now. Requires b.mu held.
func (acc *Account) letGoLocked(now time.Time, i int) {
	t := acc.line[i]
	if !t.paid {
		t.paid = acc.spendLocked(now)
	}
	acc.lastHeard = max(acc.lastHeard, clock.Mono(now))
	acc.popLocked(i)
	t.letGo = true
	t.clk.Fire(t.ch)
}

// popLocked takes the i-th ticket out of line; a new head of the line is
// woken to watch for its probe. Requires b.mu held.
func (acc *Account) popLocked(i int) {
	t := acc.line[i]
	if i == 0 {
		// The head leaves most often: without a copy of the line behind it.
		acc.line[0] = nil
		acc.line = acc.line[1:]
	} else {
		acc.line = slices.Delete(acc.line, i, i+1)
	}
	t.done = true
	acc.waiting.Add(-1)
	if i == 0 && len(acc.line) > 0 {
		h := acc.line[0]
		h.clk.Fire(h.ch)
	}
}
