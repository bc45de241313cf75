package retryhttp

import (
	"io"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// drainWatch cuts off the reads of a Transport's failed bodies that stall
// (see cutter): the drains in progress share one timer, armed at the
// earliest cut-off, rather than each setting a timer of its own. A timer's
// reset and stop would cost a drain more than reading a small body does;
// here a drain costs a lock, a push on a heap and a cutter from the watch's
// spares, and the timer is reset about once per cut-off period however many
// drains a Transport runs (a drain that ends leaves it armed: when it fires
// with nothing due, it is set for the next cut-off, if any, or left off).
//
// The timer belongs to the world it was made in: the real one, or a
// testing/synctest bubble (clock.InBubble), where a timer must not be
// reset from outside. A Transport keeps a watch for each (Transport.drains),
// and the bubble's makes a new timer each time it arms one rather than
// reset one another bubble may own: a stale timer's firing does nothing.
type drainWatch struct {
	mu     sync.Mutex
	q      cutOffs     // the drains in progress, earliest cut-off first
	spares []*cutter   // cutters of drains over, at most maxSpares
	timer  clock.Timer // the timer, armed for at if armed
	armed  bool
	at     int64  // the cut-off it is armed for, on the Transport's monotonic scale
	gen    uint64 // the generation of the timer in use: a stale timer's fire does nothing
	fresh  bool   // make a new timer for each arming (a bubble's watch)
}

// maxSpares is the most cutters a watch keeps for the drains to come.
const maxSpares = 16

// cutOff returns a cutter set to end the reads of body limit after now, a
// time just read from the Transport's clock, and the watch it is on. A zero
// now is the time of the cut-off's own read, of the monotonic clock alone
// for the real clock (clock.MonoNowIn).
func (t *Transport) cutOff(body io.Closer, now time.Time, limit time.Duration) (*cutter, *drainWatch) {
	var m int64
	var bubble bool
	switch {
	case !now.IsZero():
		m, bubble = t.monoAt(now), t.realClock && clock.InBubble(now)
	case t.realClock:
		m, bubble = clock.MonoNowIn()
	default:
		m = t.monoAt(t.clock.Now())
	}
	w := &t.drains[0]
	if bubble {
		w = &t.drains[1]
	}
	w.mu.Lock()
	w.fresh = bubble
	var c *cutter
	if n := len(w.spares); n > 0 {
		c = w.spares[n-1]
		w.spares = w.spares[:n-1]
	} else {
		c = new(cutter)
	}
	c.until, c.fired, c.closed = m+int64(limit), false, false
	if rb, ok := body.(interface{ abort() }); ok {
		c.abort = rb
	} else {
		c.body = body
	}
	w.q.push(c)
	if !w.armed || c.until < w.at {
		w.arm(t, c.until, m)
	}
	w.mu.Unlock()
	return c, w
}

// cutDone takes cutter c off its watch w, the reads of body being over, and
// closes body, unless the cut-off closed it already: body is closed exactly
// once. The cutter goes back to the watch's spares.
func (t *Transport) cutDone(c *cutter, w *drainWatch, body io.Closer) {
	w.mu.Lock()
	closed := c.closed
	if !c.fired {
		w.q.remove(c)
	}
	c.abort, c.body = nil, nil
	if len(w.spares) < maxSpares {
		w.spares = append(w.spares, c)
	}
	w.mu.Unlock()
	if !closed {
		body.Close()
	}
}

// arm sets the timer to fire at until, now being m. Requires w.mu held.
func (w *drainWatch) arm(t *Transport, until, m int64) {
	d := time.Duration(until - m)
	w.armed, w.at = true, until
	if w.timer != nil && !w.fresh {
		w.timer.Reset(d)
		return
	}
	w.gen++
	gen := w.gen
	w.timer = t.clock.AfterFunc(d, func() { w.fire(t, gen) })
}

// fire is the timer's: it cuts off the drains whose cut-off has come, one
// at a time, outside the lock (a Close that blocks, as HTTP/2's may, must
// not hold up the drains that end meanwhile), then sets the timer for the
// next cut-off.
func (w *drainWatch) fire(t *Transport, gen uint64) {
	w.mu.Lock()
	if gen != w.gen {
		w.mu.Unlock()
		return // a stale bubble's timer
	}
	w.armed = false
	for {
		m := t.monoAt(t.clock.Now())
		if len(w.q) == 0 {
			break
		}
		c := w.q[0]
		if c.until > m {
			w.arm(t, c.until, m)
			break
		}
		w.q.remove(c)
		c.fired = true
		abort, body := c.abort, c.body
		c.abort, c.body = nil, nil
		c.closed = abort == nil
		w.mu.Unlock()
		if abort != nil {
			abort.abort()
		} else if body != nil {
			go body.Close() // it may block; the next cut-offs may not
		}
		w.mu.Lock()
	}
	w.mu.Unlock()
}

// cutOffs is a min-heap of cutters by their cut-off (cutter.at is the
// index of each, plus one). (Its own, not container/heap's: the drain of
// every failed attempt pushes and removes one, and an interface's calls
// cost that path a tenth of its time.)
type cutOffs []*cutter

func (q *cutOffs) push(c *cutter) {
	*q = append(*q, c)
	q.up(len(*q) - 1)
}

// remove takes c off the heap.
func (q *cutOffs) remove(c *cutter) {
	h := *q
	i, last := c.at-1, len(h)-1
	if i != last {
		h.swap(i, last)
	}
	h[last] = nil
	*q = h[:last]
	c.at = 0
	if i != last {
		if !q.down(i) {
			q.up(i)
		}
	}
}

func (q cutOffs) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].at, q[j].at = i+1, j+1
}

func (q cutOffs) up(i int) {
	q[i].at = i + 1
	for i > 0 {
		p := (i - 1) / 2
		if q[p].until <= q[i].until {
			break
		}
		q.swap(i, p)
		i = p
	}
}

// down moves the cutter at i down to its place, and reports whether it moved.
func (q cutOffs) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q[r].until < q[l].until {
			m = r
		}
		if q[i].until <= q[m].until {
			break
		}
		q.swap(i, m)
		i = m
	}
	return i > start
}
