package budget

import (
	"container/heap"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A waiting retry leaves the line unreleased at its until (its caller's
// horizon). The budget's one timer expires it, so that a retry in line
// holds no timer of its own: 10,000 of them waiting out an outage hold one
// timer, not 10,000.

// outLocked marks t out of line (l.line no longer holds it). Requires
// b.mu held.
func (b *Budget) outLocked(t *Ticket) {
	t.done = true
	if t.at > 0 {
		heap.Remove(&b.exp, int(t.at-1))
	}
	b.waiting.Add(-1)
}

// expireLocked takes the tickets whose until has come at now out of line,
// marked expired, and returns them appended to out. Requires b.mu held.
func (b *Budget) expireLocked(now time.Time, out []*Ticket) []*Ticket {
	m := clock.Mono(now)
	n := len(out)
	for len(b.exp) > 0 && b.exp[0].until <= m {
		t := b.exp[0]
		b.outLocked(t) // out of b.exp
		t.expired = true
		out = append(out, t)
	}
	for i, t := range out[n:] {
		if i > 0 && out[n+i-1].l == t.l {
			continue // its lane done already (the usual case: one host)
		}
		l := t.l
		l.line = slices.DeleteFunc(l.line, func(t *Ticket) bool { return t.done })
		if len(l.line) == 0 {
			l.gentle = false
		}
	}
	return out
}

// expiries is a min-heap of the tickets that leave the line at their until.
type expiries []*Ticket

func (q expiries) Len() int           { return len(q) }
func (q expiries) Less(i, j int) bool { return q[i].until < q[j].until }
func (q expiries) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].at, q[j].at = int32(i+1), int32(j+1)
}
func (q *expiries) Push(x any) {
	t := x.(*Ticket)
	t.at = int32(len(*q)) + 1
	*q = append(*q, t)
}
func (q *expiries) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	t.at = 0
	return t
}
