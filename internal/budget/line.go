package budget

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// recovery is the state of a recovering budget. Requires Budget.mu held.
type recovery struct {
	on                bool
	start             time.Time // the current round's start
	allowed, released int       // releases allowed and made in this round
	succ, fail        int       // retries that succeeded, attempts that failed, in this round
	first             int       // first attempts that succeeded in this round
}

// A Ticket is a retry waiting in a Budget's line.
type Ticket struct {
	b       *Budget
	release func()
	done    bool // released or canceled; requires b.mu held
}

// Enqueue puts a retry that Retry refused in line at now. release is called
// once, from Advance (or the budget's timer), when the budget lets the
// retry go; it must not call the Budget. Cancel takes a ticket out of line.
// A nil Budget releases the retry at once.
func (b *Budget) Enqueue(now time.Time, release func()) *Ticket {
	t := &Ticket{b: b, release: release}
	if b == nil {
		t.done = true
		release()
		return t
	}
	b.mu.Lock()
	b.enqueueLocked(now, t)
	b.mu.Unlock()
	return t
}

// enqueueLocked puts t in line at now. Requires b.mu held.
func (b *Budget) enqueueLocked(now time.Time, t *Ticket) {
	if len(b.line) == 0 {
		b.news(now) // the silence a probe needs counts from the line's start at the earliest
		b.since = now
	}
	b.line = append(b.line, t)
	b.waiting.Add(1)
	b.armLocked()
}

// Cancel takes t out of line. It reports false if t was already released
// (or canceled): the retry may then go, or its release is wasted.
func (t *Ticket) Cancel() bool {
	b := t.b
	if b == nil {
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
	if b == nil {
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
//
// A success while retries wait starts a recovery (see Success): rounds of
// 100 ms, the first allowing 2 releases (1 after a long outage), each next
// one twice the retries that succeeded in the round before while no attempt
// failed in it, half of them once some did, and none once no retry
// succeeded (the recovery ends). After a long outage a round allows no more
// than half the first attempts that succeeded in the round before (at
// least 1). Without a recovery, the head of the line goes as a probe once
// the dependency has been silent for the probe's idle time, which doubles
// with each probe up to 32 s until a success.
func (b *Budget) advanceLocked(now time.Time) []*Ticket {
	r := &b.rec
	for r.on && !now.Before(r.start.Add(round)) {
		// A new round: its allowance follows the last one's outcomes.
		next := recovery{on: true, start: r.start.Add(round)}
		switch {
		case r.succ == 0:
			next = recovery{} // no retry succeeded: back to probing
		case r.fail == 0:
			next.allowed = 2 * r.succ
		default:
			next.allowed = max(r.succ/2, 1)
		}
		if r.first > 0 && next.start.Sub(b.since) > longOutage {
			// After a long outage, released retries add at most half again
			// the load the client's own traffic puts on the dependency.
			next.allowed = min(next.allowed, max(r.first/2, 1))
		}
		*r = next
	}
	var out []*Ticket
	if r.on {
		for len(b.line) > 0 && r.released < r.allowed && !now.Before(b.releaseAt()) {
			out = append(out, b.popLocked())
			r.released++
		}
	} else if len(b.line) > 0 && clock.Mono(now) >= b.active.Load()+int64(b.probeIdle()) {
		out = append(out, b.popLocked())
		b.news(now) // the probe's own time counts as news
		b.probe = min(2*b.probeIdle(), maxProbeAfter)
	}
	return out
}

// releaseAt returns when the next release of the round is due: the
// round's releases are spread evenly over it. Requires b.mu held and a
// recovery on.
func (b *Budget) releaseAt() time.Time {
	r := &b.rec
	return r.start.Add(time.Duration(int64(round) * int64(r.released) / int64(r.allowed)))
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
		return r.start.Add(round)
	}
	return clock.FromMono(b.active.Load() + int64(b.probeIdle()))
}

// probeIdle returns the silence the next probe needs. Requires b.mu held.
func (b *Budget) probeIdle() time.Duration {
	if b.probe == 0 {
		return probeAfter
	}
	return b.probe
}

// popLocked takes the head of the line out. Requires b.mu held and a
// ticket in line.
func (b *Budget) popLocked() *Ticket {
	t := b.line[0]
	b.line[0] = nil
	b.line = b.line[1:]
	t.done = true
	b.waiting.Add(-1)
	return t
}
