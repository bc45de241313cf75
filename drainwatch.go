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
// A drain in a testing/synctest bubble has a timer of its own instead
// (cutAlone): a timer made in a bubble belongs to it, must not be reset
// outside it, and runs on its clock; one watch shared by the bubbles that
// use a Transport, one after another or at once, could neither keep a
// bubble's timer nor time one bubble's drains by another's clock.
type drainWatch struct {
	mu     sync.Mutex
	q      cutOffs     // the drains in progress, earliest cut-off first
	spares []*cutter   // cutters of drains over, at most maxSpares
	timer  clock.Timer // the timer, armed for at if armed
	armed  bool
	at     int64 // the cut-off it is armed for, on the Transport's monotonic scale
}

// maxSpares is the most cutters a watch keeps for the drains to come.
const maxSpares = 16

// cutOff returns a cutter set to end the reads of body limit from now, and
// the watch it is on: nil for a cutter with a timer of its own (in a
// testing/synctest bubble, told by the read of the monotonic clock that
// dates the cut-off, clock.MonoNowIn).
func (t *Transport) cutOff(body io.Closer, limit time.Duration) (*cutter, *drainWatch) {
	var m int64
	if t.realClock {
		var bubble bool
		if m, bubble = clock.MonoNowIn(); bubble {
			return t.cutAlone(body, limit), nil
		}
	} else {
		m = t.monoAt(t.clock.Now())
	}
	w := &t.drains
	w.mu.Lock()
	var c *cutter
	if n := len(w.spares); n > 0 {
		c = w.spares[n-1]
		w.spares = w.spares[:n-1]
	} else {
		c = new(cutter)
	}
	c.until, c.fired, c.closed = m+int64(limit), false, false
	c.setTarget(body)
	w.q.push(c)
	if !w.armed || c.until < w.at {
		w.arm(t, c.until, m)
	}
	w.mu.Unlock()
	return c, w
}

// setTarget sets what c's cut-off ends: the attempt's context when body is
// the Transport's own (a releaseBody), else body.
func (c *cutter) setTarget(body io.Closer) {
	if rb, ok := body.(interface{ abort() }); ok {
		c.abort, c.body = rb, nil
	} else {
		c.abort, c.body = nil, body
	}
}

// cutDone takes cutter c off its watch w (nil for a cutter alone), the
// reads of body being over, and closes body, unless the cut-off closed it
// already: body is closed exactly once. A watch's cutter goes back to its
// spares.
func (t *Transport) cutDone(c *cutter, w *drainWatch, body io.Closer) {
	if w == nil {
		t.aloneDone(c, body)
		return
	}
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
	if w.timer != nil {
		w.timer.Reset(d)
		return
	}
	w.timer = t.clock.AfterFunc(d, func() { w.fire(t) })
}

// fire is the timer's: it cuts off the drains whose cut-off has come, one
// at a time, outside the lock, then sets the timer for the next cut-off.
// On the real clock a body is closed on a goroutine of its own: a Close
// that blocks (HTTP/2's may, on a stalled connection) must not hold up the
// next cut-offs. (On a simulation's clock it is closed in turn, so that the
// simulation stays in its order of events.)
func (w *drainWatch) fire(t *Transport) {
	w.mu.Lock()
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
		abort, body := c.take()
		w.mu.Unlock()
		cut(abort, body, t.realClock)
		w.mu.Lock()
	}
	w.mu.Unlock()
}

// cutAlone returns a cutter with a timer of its own, set to end the reads
// of body after limit: a drain's in a testing/synctest bubble (see
// drainWatch). Its state is kept under t.aloneMu.
func (t *Transport) cutAlone(body io.Closer, limit time.Duration) *cutter {
	c := new(cutter)
	c.setTarget(body)
	c.timer = t.clock.AfterFunc(limit, func() { t.aloneFire(c) })
	return c
}

// aloneFire is the timer of a cutter alone: it ends what the cutter was
// set to end, unless its drain is over.
func (t *Transport) aloneFire(c *cutter) {
	t.aloneMu.Lock()
	if c.done {
		t.aloneMu.Unlock()
		return
	}
	abort, body := c.take()
	t.aloneMu.Unlock()
	cut(abort, body, false)
}

// take marks c's cut-off come and returns what it ends. Requires the lock
// that guards c (its watch's, or aloneMu).
func (c *cutter) take() (abort interface{ abort() }, body io.Closer) {
	abort, body = c.abort, c.body
	c.abort, c.body = nil, nil
	c.fired, c.closed = true, abort == nil
	return abort, body
}

// cut ends what a cutter's cut-off ends, taken from it (take) and ended
// outside its lock: the attempt's context, or else the body, closed on a
// goroutine of its own if async.
func cut(abort interface{ abort() }, body io.Closer, async bool) {
	switch {
	case abort != nil:
		abort.abort()
	case body == nil:
	case async:
		go body.Close()
	default:
		body.Close()
	}
}

// aloneDone ends the drain of a cutter alone: its timer stopped (in the
// bubble that made it), body closed unless the cutter closed it.
func (t *Transport) aloneDone(c *cutter, body io.Closer) {
	c.timer.Stop()
	t.aloneMu.Lock()
	c.done = true
	closed := c.closed
	t.aloneMu.Unlock()
	if !closed {
		body.Close()
	}
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
