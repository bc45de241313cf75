package budget

import (
	"context"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A host's line holds the retries that wait on evidence from other requests
// (see Account.Retry). What moves it is news of the host:
//   - Its first success starts a recovery: rounds of 100 ms, 2 retries let
//     go in the first, then twice the retries that succeeded in the round
//     before while none failed, half of them once some did, until none
//     succeeds. While no attempt has failed since the recovery started (a
//     host back from a short outage), each retry's success lets two more
//     go in the round besides, as they fit in its spread, so that the ramp
//     doubles with each round trip; the first failure ends the round.
//     After a long outage (no success for 5 s) a round lets go no
//     more than half the first attempts that succeeded in the round before
//     (at least 1): a dependency just back meets little more than the
//     client's own load.
//   - Besides, each success lets one waiting retry go if the credit pays
//     for it, so that the retries of a host failing part of its attempts
//     go as fast as they are earned.
//   - Without news of the host, the retry at the head of the line goes as
//     a probe after a silence of its own longest backoff (see probePace),
//     stretched by a jitter in [1, 2) so that clients whose lines formed
//     together do not probe together. The probe's own time counts as news.
//   - A release is a retry: it spends one of the credit, if there is one.
//   - Each retry leaves the line at the latest at the time its waiter
//     gives (Wait's until: its request's schedule, or its deadline). It
//     goes then if the host is recovering and no attempt has failed since
//     the recovery started, and is refused otherwise: the ramp paces a
//     host that answers, and fails no retry to it.
const (
	round         = 100 * time.Millisecond
	probeAfter    = 100 * time.Millisecond // a probe's pace when its retry says none
	minProbeAfter = time.Millisecond
	maxProbeAfter = 5 * time.Second
	longOutage    = 5 * time.Second
)

// recovery is the state of a recovering line.
type recovery struct {
	on                bool
	start             time.Time // the current round's start
	allowed, released int       // releases allowed and made in this round
	succ, fail        int       // retries that succeeded, attempts that failed, in this round
	first             int       // first attempts that succeeded in this round
	failed            bool      // an attempt failed since the recovery started
}

// A Ticket is a retry waiting in an account's line.
type Ticket struct {
	pace     time.Duration // the longest wait its retry's policy gives it; 0: none said
	clk      clock.Clock   // its waiter's; nil: nobody sleeps on it (a test's)
	ch       chan struct{} // fired to wake its waiter (clk.Fire): released, or to look again
	done     bool          // out of line: released or canceled
	released bool          // let go by the line
}

// Wait puts a retry to the account's host in line at clk.Now() and blocks
// until the line lets it go (true), or until ctx is done (false), or until
// has passed (see lastCallLocked); the zero until is no limit but ctx.
// pace is the longest wait the retry's policy gives it (see probePace). The retry at the head
// of the line also wakes when the line is due to move, and moves it; rnd, a
// source of uniform samples in [0, 1), jitters the probes' silences (the
// first Wait's; nil: none). A nil Account lets the retry go at once.
func (l *Account) Wait(clk clock.Clock, rnd func() float64, ctx context.Context, until time.Time, pace time.Duration) bool {
	if l == nil {
		return true
	}
	b := l.b
	t := &Ticket{pace: pace, clk: clk, ch: clk.Signal()}
	b.mu.Lock()
	if l.rnd == nil {
		l.rnd = rnd
	}
	now := clk.Now()
	if ctx.Err() != nil || (!until.IsZero() && !now.Before(until)) {
		b.mu.Unlock()
		return false
	}
	l.enqueueLocked(now, t)
	for {
		if t.done {
			b.mu.Unlock()
			return t.released
		}
		due := until
		if l.line[0] == t {
			if next := l.nextLocked(); !next.IsZero() && (due.IsZero() || next.Before(due)) {
				due = next
			}
		}
		b.mu.Unlock()
		woke := clk.Sleep(ctx, due, t.ch)
		now := clk.Now()
		b.mu.Lock()
		switch {
		case t.done:
		case woke == clock.WokeContext:
			l.cancelLocked(t)
		case !until.IsZero() && !now.Before(until):
			l.lastCallLocked(now, t)
		case woke == clock.WokeTime:
			l.advanceLocked(now)
		}
	}
}

// lastCallLocked takes t out of line when its waiter's time in it has
// run out: it goes if the host is recovering and no attempt failed since
// (the line held it only to pace a host that is answering), and is refused
// otherwise. Requires b.mu held.
func (l *Account) lastCallLocked(now time.Time, t *Ticket) {
	i := slices.Index(l.line, t)
	if i < 0 {
		return
	}
	if !l.rec.on || l.rec.failed {
		l.popLocked(i)
		return
	}
	l.spendLocked(now) // a release is a retry: it spends what credit there is
	l.releaseLocked(i)
	l.rec.released++
}

// enqueueLocked puts t in line at now. Requires b.mu held.
func (l *Account) enqueueLocked(now time.Time, t *Ticket) {
	if len(l.line) == 0 {
		l.newsLocked(now) // the silence a probe needs counts from the line's start at the earliest
		l.stretch = l.draw()
	}
	l.line = append(l.line, t)
	l.waiting.Add(1)
}

// cancelLocked takes t out of line unreleased. Requires b.mu held.
func (l *Account) cancelLocked(t *Ticket) {
	if i := slices.Index(l.line, t); i >= 0 {
		l.popLocked(i)
	}
}

// popLocked takes the i-th ticket out of line and returns it; a new head
// of the line is woken to watch when the line next moves. Requires b.mu
// held.
func (l *Account) popLocked(i int) *Ticket {
	t := l.line[i]
	if i == 0 {
		l.line[0] = nil
		l.line = l.line[1:]
	} else {
		l.line = slices.Delete(l.line, i, i+1)
	}
	t.done = true
	l.waiting.Add(-1)
	if len(l.line) == 0 {
		l.gentle = false
	} else if i == 0 {
		l.line[0].wake()
	}
	return t
}

// release takes the i-th ticket out of line and lets its retry go.
// Requires b.mu held.
func (l *Account) releaseLocked(i int) {
	t := l.popLocked(i)
	t.released = true
	t.wake()
}

// wake wakes t's waiter, to find it released or to look at the line again.
// Requires b.mu held (the waiter reads what changed under it).
func (t *Ticket) wake() {
	if t.clk == nil {
		return
	}
	t.clk.Fire(t.ch)
}

// newsLocked records that the account heard of its host at now (or that its
// line formed): the last such time starts the silence before a probe.
// Requires b.mu held.
func (l *Account) newsLocked(now time.Time) { l.news = max(l.news, clock.Mono(now)) }

// draw returns a stretch of a probe's silence: uniform in [1, 2), or 1
// without a source of jitter. Requires b.mu held.
func (l *Account) draw() float64 {
	if l.rnd == nil {
		return 1
	}
	return 1 + l.rnd()
}

// recover is the news of a success of the host at now, by an attempt
// numbered attempt (see Success).
func (l *Account) recover(now time.Time, attempt int) {
	b := l.b
	b.mu.Lock()
	defer b.mu.Unlock()
	l.failing.Store(false)
	l.fails = [2]failure{} // the host answered: earlier failures are no evidence
	l.stretch = l.draw()
	if len(l.line) == 0 {
		l.upAt = now
		return
	}
	if !l.upAt.IsZero() && now.Sub(l.upAt) > longOutage {
		l.gentle = true // no success for long: the ramp alone lets the line go
	}
	l.upAt = now
	l.newsLocked(now)
	l.roundLocked(now)
	switch {
	case !l.rec.on:
		allowed := 2
		if l.gentle {
			allowed = 1 // a long outage: start gently (see advanceLocked)
		}
		// The ramp's first release goes now, and only it: one retry let
		// go at an instant, so that the order of what follows does not
		// depend on which of two goroutines runs first.
		l.rec = recovery{on: true, start: now, allowed: allowed}
		l.advanceLocked(now) // (the new head of the line, woken, watches for the next)
		return
	case attempt > 1:
		l.rec.succ++
		if !l.gentle && !l.rec.failed {
			// A retry succeeded, and no attempt failed since the recovery
			// started: two more may go in this round, so that the ramp
			// doubles with each round trip while the host answers.
			l.rec.allowed += 2
			l.line[0].wake()
		}
	default:
		l.rec.first++
	}
	if !l.gentle && l.spendLocked(now) {
		l.releaseLocked(0)
	}
}

// Advance moves the line to now, letting go the retries due, and returns
// when it is next due to move (the zero Time when nobody waits).
func (l *Account) Advance(now time.Time) (next time.Time) {
	if l == nil {
		return time.Time{}
	}
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	l.advanceLocked(now)
	return l.nextLocked()
}

// advanceLocked moves the line to now and lets go the retries due: those a
// recovery's round allows, spread over the round, or else a probe after the
// silence it needs. Requires b.mu held.
func (l *Account) advanceLocked(now time.Time) {
	r := &l.rec
	l.roundLocked(now)
	if r.on {
		for len(l.line) > 0 && r.released < r.allowed && !now.Before(l.releaseAt()) {
			l.spendLocked(now) // a release is a retry: it spends what credit there is
			l.releaseLocked(0)
			r.released++
		}
		return
	}
	if len(l.line) > 0 && clock.Mono(now)-l.news >= int64(l.probeIdle()) {
		l.spendLocked(now)
		l.releaseLocked(0)
		l.newsLocked(now) // the probe's own time counts as news
		l.stretch = l.draw()
	}
}

// roundLocked moves a recovery to the round now falls in: each round's
// allowance follows the outcomes of the round before. An outcome is counted
// in the round it comes in. Requires b.mu held.
func (l *Account) roundLocked(now time.Time) {
	r := &l.rec
	for r.on && !now.Before(r.start.Add(round)) {
		// A new round: its allowance follows the last one's outcomes.
		next := recovery{on: true, start: r.start.Add(round), failed: r.failed}
		switch {
		case r.succ == 0:
			next = recovery{} // no retry succeeded: back to probing
		case r.fail == 0:
			next.allowed = 2 * r.succ
		default:
			next.allowed = max(r.succ/2, 1)
		}
		if l.gentle {
			// After a long outage, released retries add at most half again
			// the load the client's own traffic puts on the host (one a
			// round when it sends none).
			next.allowed = min(next.allowed, max(r.first/2, 1))
		}
		*r = next
	}
}

// nextLocked returns when the line is next due to move (zero: nobody in
// line). Requires b.mu held.
func (l *Account) nextLocked() time.Time {
	if len(l.line) == 0 {
		return time.Time{}
	}
	r := &l.rec
	if r.on {
		if r.released < r.allowed {
			return l.releaseAt()
		}
		return r.start.Add(round)
	}
	return clock.FromMono(l.news + int64(l.probeIdle()))
}

// releaseAt returns when the next release of the round is due: the
// round's releases are spread evenly over it. Requires a recovery on.
func (l *Account) releaseAt() time.Time {
	r := &l.rec
	return r.start.Add(time.Duration(int64(round) * int64(r.released) / int64(r.allowed)))
}

// probePace returns the silence the next probe needs, before the account's
// jitter: the longest wait the policy of the retry at the head of the line
// gives it, within [minProbeAfter, maxProbeAfter] (probeAfter for a
// retry that says none). A probe is that retry, going about when its own
// backoff would have let it: the line never makes the host's probes more
// frequent than its retries' policies, and a head on a later retry probes
// at that retry's longer pace. Requires b.mu held.
func (l *Account) probePace() time.Duration {
	if len(l.line) == 0 || l.line[0].pace <= 0 {
		return probeAfter
	}
	return min(max(l.line[0].pace, minProbeAfter), maxProbeAfter)
}

// probeIdle returns the silence the next probe needs: its pace (see
// probePace) stretched by the account's jitter. Requires b.mu held.
func (l *Account) probeIdle() time.Duration {
	idle := l.probePace()
	if l.stretch > 1 {
		idle = time.Duration(float64(idle) * l.stretch)
	}
	return idle
}
