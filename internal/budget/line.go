package budget

import (
	"container/heap"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// maxLanes bounds the hosts a Budget keeps a lane for: past it, a lane with
// nobody in line is forgotten, oldest first (its probe pace with it).
const maxLanes = 1024

// A lane is one host's line of retries, and what moves it: the news of the
// host (its successes start a recovery, its silence lets a probe go).
// Requires Budget.mu held for all of it.
type lane struct {
	b      *Budget
	key    string
	line   []*Ticket     // FIFO
	rec    recovery      //
	probe  time.Duration // the silence the next probe needs; 0: probeAfter
	active int64         // the last news of the host, on the monotonic scale (clock.Mono)
	down   bool          // its last outcome failed: its retries wait in line
	upAt   time.Time     // the host's last success (or when the lane was made)
	gentle bool          // back from a long outage: the ramp alone lets the line go
	// stretch, in [1, 2), multiplies the silence the next probe needs, so
	// that clients whose lines formed together do not probe in lockstep;
	// drawn anew with each probe and success (0 until the first: 1).
	stretch float64
}

// recovery is the state of a recovering lane.
type recovery struct {
	on                bool
	start             time.Time // the current round's start
	allowed, released int       // releases allowed and made in this round
	succ, fail        int       // retries that succeeded, attempts that failed, in this round
	first             int       // first attempts that succeeded in this round
}

// news records that the lane heard of its host at now (or that its line
// formed): the last such time starts the silence before a probe.
func (l *lane) news(now time.Time) { l.active = max(l.active, clock.Mono(now)) }

// laneKey returns the key of host's lane: host names compare in ASCII
// lower case. It allocates only for a host with upper-case letters.
func laneKey(host string) string {
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			b := []byte(host)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return host
}

// laneLocked returns host's lane, making it at now if need be. Requires
// b.mu held.
func (b *Budget) laneLocked(host string, now time.Time) *lane {
	key := laneKey(host)
	if l := b.lanes[key]; l != nil {
		return l
	}
	if b.lanes == nil {
		b.lanes = make(map[string]*lane)
	}
	if len(b.order) >= maxLanes {
		b.forgetIdleLocked()
	}
	l := &lane{b: b, key: key, upAt: now}
	b.lanes[key] = l
	b.order = append(b.order, l)
	return l
}

// forgetIdleLocked forgets the oldest lanes with nobody in line (and their
// runs of failures), down to half of maxLanes if it can. Requires b.mu
// held.
func (b *Budget) forgetIdleLocked() {
	excess := len(b.order) - maxLanes/2
	kept := b.order[:0]
	for _, l := range b.order {
		if excess > 0 && len(l.line) == 0 {
			b.upLocked(l)
			delete(b.lanes, l.key)
			excess--
			continue
		}
		kept = append(kept, l)
	}
	clear(b.order[len(kept):])
	b.order = kept
}

// A Ticket is a retry waiting in a Budget's line.
type Ticket struct {
	l       *lane
	ch      chan struct{} // Wait's: fired on the budget's clock (Enqueue's: nil, see Budget.releases)
	until   int64         // Wait's: when it leaves the line unreleased, on the monotonic scale; 0: never
	at      int32         // its index in Budget.exp plus one; 0: not there
	last    bool          // the retry is its request's last attempt: see lane.prober
	done    bool          // out of line: released, expired or canceled; requires b.mu held
	expired bool          // its until came before a release; requires b.mu held
}

// Enqueue puts a retry to host that Retry refused in line at now. release
// is called once, from Advance (or the budget's timer), when the budget
// lets the retry go; it must not call the Budget. Cancel takes a ticket out
// of line. A nil Budget releases the retry at once.
func (b *Budget) Enqueue(host string, now time.Time, release func()) *Ticket {
	t := new(Ticket)
	if b == nil {
		t.done = true
		release()
		return t
	}
	b.mu.Lock()
	if b.releases == nil {
		b.releases = make(map[*Ticket]func())
	}
	b.releases[t] = release
	b.enqueueLocked(host, now, t)
	b.mu.Unlock()
	return t
}

// enqueueLocked puts t in host's line at now, and among the tickets that
// expire if it has an until. Requires b.mu held.
func (b *Budget) enqueueLocked(host string, now time.Time, t *Ticket) {
	l := b.laneLocked(host, now)
	t.l = l
	if len(l.line) == 0 {
		l.news(now) // the silence a probe needs counts from the line's start at the earliest
		l.stretch = b.draw()
	}
	l.line = append(l.line, t)
	if t.until != 0 {
		heap.Push(&b.exp, t)
	}
	b.waiting.Add(1)
	b.armLocked()
}

// fire lets a ticket taken out of line know: its release, or its channel
// fired on the budget's clock. It must be called without b.mu held.
func (b *Budget) fire(t *Ticket) {
	if t.ch != nil {
		b.clk.Fire(t.ch)
		return
	}
	b.mu.Lock()
	release := b.releases[t]
	delete(b.releases, t)
	b.mu.Unlock()
	release()
}

// Cancel takes t out of line. It reports false if t was already released
// (or canceled): the retry may then go, or its release is wasted.
func (t *Ticket) Cancel() bool {
	if t.l == nil {
		return false // a nil Budget's: released at once
	}
	b := t.l.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.done {
		return false
	}
	if i := slices.Index(t.l.line, t); i >= 0 {
		b.popLocked(t.l, i)
	}
	delete(b.releases, t)
	return true
}

// Advance releases the retries that are due at now and returns when it is
// next to be called (the zero Time when no retry waits).
func (b *Budget) Advance(now time.Time) (next time.Time) {
	if b == nil {
		return time.Time{}
	}
	b.mu.Lock()
	// Expired first: a ticket whose until has passed is not let go after it
	// (a late tick, or a coarse Advance).
	out := b.advanceLocked(now, b.expireLocked(now, nil))
	next = b.nextLocked()
	b.mu.Unlock()
	for _, t := range out {
		b.fire(t)
	}
	return next
}

// advanceLocked moves every lane with a line to now and takes the retries
// due out of line. Requires b.mu held.
func (b *Budget) advanceLocked(now time.Time, out []*Ticket) []*Ticket {
	for _, l := range b.order {
		if len(l.line) > 0 {
			out = l.advance(b, now, out)
		}
	}
	return out
}

// advance moves lane l to now and appends the retries due to out.
// Requires b.mu held.
//
// A success of the host while retries wait starts a recovery (see
// Success): rounds of 100 ms, the first allowing 2 releases (1 after a long
// outage), each next one twice the retries that succeeded in the round
// before while no attempt failed in it, half of them once some did, and
// none once no retry succeeded (the recovery ends). After a long outage a
// round allows no more than half the first attempts that succeeded in the
// round before (at least 1, also when the client sends none). Without a
// recovery, a retry in line goes as a probe once the host has been silent
// for the probe's idle time: 100 ms at first, doubling with each probe up
// to 5 s until a success, as a backoff would, and stretched by a jitter in
// [1, 2). The probe is the first retry in line that is not a kept last
// attempt; a kept last attempt probes only after 2 s of silence (or twice
// the idle time), so that a request alone in an outage keeps its last
// attempt for the host's return while others' news comes.
func (l *lane) advance(b *Budget, now time.Time, out []*Ticket) []*Ticket {
	r := &l.rec
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
		if l.gentle {
			// After a long outage, released retries add at most half again
			// the load the client's own traffic puts on the host (one a
			// round when it sends none).
			next.allowed = min(next.allowed, max(r.first/2, 1))
		}
		*r = next
	}
	if r.on {
		for len(l.line) > 0 && r.released < r.allowed && !now.Before(l.releaseAt()) {
			out = append(out, b.popLocked(l, 0))
			r.released++
		}
		return out
	}
	if i := l.prober(now); i >= 0 {
		out = append(out, b.popLocked(l, i))
		l.news(now) // the probe's own time counts as news
		l.probe = min(2*max(l.probe, probeAfter), maxProbeAfter)
		l.stretch = b.draw()
	}
	return out
}

// prober returns the index in line of the retry due to probe at now, or
// -1: see advance.
func (l *lane) prober(now time.Time) int {
	silent := clock.Mono(now) - l.active
	if len(l.line) == 0 || silent < int64(l.probeIdle()) {
		return -1
	}
	for i, t := range l.line {
		if !t.last {
			return i
		}
	}
	if silent < int64(l.lastIdle()) {
		return -1
	}
	return 0
}

// lastIdle returns the silence before a last attempt probes.
func (l *lane) lastIdle() time.Duration { return max(lastProbe, 2*l.probeIdle()) }

// releaseAt returns when the next release of the round is due: the
// round's releases are spread evenly over it. Requires a recovery on.
func (l *lane) releaseAt() time.Time {
	r := &l.rec
	return r.start.Add(time.Duration(int64(round) * int64(r.released) / int64(r.allowed)))
}

// nextLocked returns when Advance is next due. Requires b.mu held.
func (b *Budget) nextLocked() time.Time {
	var next time.Time
	if len(b.exp) > 0 {
		next = clock.FromMono(b.exp[0].until)
	}
	for _, l := range b.order {
		if n := l.next(); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// next returns when the lane is next due to move (zero: nobody in line).
func (l *lane) next() time.Time {
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
	idle := l.probeIdle()
	if !slices.ContainsFunc(l.line, func(t *Ticket) bool { return !t.last }) {
		idle = l.lastIdle()
	}
	return clock.FromMono(l.active + int64(idle))
}

// probeIdle returns the silence the next probe needs: the pace (100 ms,
// doubling with each probe up to 5 s) stretched by the lane's jitter.
func (l *lane) probeIdle() time.Duration {
	idle := l.probe
	if idle == 0 {
		idle = probeAfter
	}
	if l.stretch > 1 {
		idle = time.Duration(float64(idle) * l.stretch)
	}
	return idle
}

// popLocked takes the i-th ticket of l's line out. Requires b.mu held.
func (b *Budget) popLocked(l *lane, i int) *Ticket {
	t := l.line[i]
	if i == 0 {
		l.line[0] = nil
		l.line = l.line[1:]
	} else {
		l.line = slices.Delete(l.line, i, i+1)
	}
	b.outLocked(t)
	if len(l.line) == 0 {
		l.gentle = false
	}
	return t
}
