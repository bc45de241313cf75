package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Virtual is a clock whose time moves only when everything that runs on it
// waits: a discrete-event loop for simulations, in which real Transports
// run their real attempt loops. Its simulated goroutines (Go, and the
// functions of its timers) run one at a time, each until it sleeps on the
// clock or ends; the clock then jumps to the earliest event due. Events due
// at one instant run in the order they were scheduled, so a run is
// deterministic: the same inputs give the same result.
//
// Code running on the clock must block only in Sleep: a simulated goroutine
// that waits on anything else (a channel, a network call) stalls the run.
// So a Transport that hedges (Policy.Hedge), whose request waits on a
// channel for its hedges' answers, cannot run on it.
// Contexts made by WithDeadline end at their deadline on the clock; a
// context's cancellation by other means wakes no Sleep.
type Virtual struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	events  events
	waiting map[chan struct{}]*sleeper // sleepers by the signal they wait for
	ties    int                        // instants at which several timers fired: see Ties
	running bool                       // Run is running: events are scheduled by what runs

	yield chan struct{} // a simulated goroutine hands control back: it sleeps or ended
}

var _ Clock = (*Virtual)(nil)

// NewVirtual returns a virtual clock reading start.
func NewVirtual(start time.Time) *Virtual {
	return &Virtual{now: start, waiting: make(map[chan struct{}]*sleeper), yield: make(chan struct{})}
}

type event struct {
	at     time.Time
	seq    uint64
	pushed time.Time   // when it was scheduled
	run    func() bool // on the loop's goroutine; reports whether the event was live (ran something)
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// pushLocked schedules run at t (now, if t is earlier). Requires v.mu held.
func (v *Virtual) pushLocked(t time.Time, run func() bool) {
	if t.Before(v.now) {
		t = v.now
	}
	e := event{at: t, seq: v.seq, run: run}
	if v.running {
		e.pushed = v.now
	} // else set from outside the run, as a timer is: at no instant of it
	heap.Push(&v.events, e)
	v.seq++
}

// Now returns the clock's time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Go runs f as a simulated goroutine, starting now (after what is due now
// already).
func (v *Virtual) Go(f func()) {
	v.mu.Lock()
	v.pushLocked(v.now, func() bool { v.spawn(f); return true })
	v.mu.Unlock()
}

// At runs f as a simulated goroutine at t.
func (v *Virtual) At(t time.Time, f func()) {
	v.mu.Lock()
	v.pushLocked(t, func() bool { v.spawn(f); return true })
	v.mu.Unlock()
}

// Run runs events until none is left, and returns the clock's time then:
// that of the last event, which may be a stopped timer's.
// Call it from one goroutine, not from a simulated one.
func (v *Virtual) Run() time.Time {
	var instant time.Time
	timed := 0 // live events of the instant scheduled before it
	v.mu.Lock()
	v.running = true
	v.mu.Unlock()
	for {
		v.mu.Lock()
		if len(v.events) == 0 {
			v.running = false
			now := v.now
			v.mu.Unlock()
			return now
		}
		e := heap.Pop(&v.events).(event)
		if !e.at.Equal(instant) {
			instant, timed = e.at, 0
		}
		v.now = e.at
		v.mu.Unlock()
		if e.run() && e.pushed.Before(e.at) {
			if timed++; timed == 2 {
				v.mu.Lock()
				v.ties++
				v.mu.Unlock()
			}
		}
	}
}

// Ties returns how many instants saw two or more timers fire (sleeps
// ending, timer functions starting, goroutines starting) that were set
// before the instant, or before Run. The
// clock runs them in the order they were set; real timers of one instant,
// and testing/synctest's, run in any order. What runs at an instant because
// something else ran at it (a signal fired) follows causally on any clock.
func (v *Virtual) Ties() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ties
}

// spawn runs f on a goroutine of its own until it sleeps or ends.
func (v *Virtual) spawn(f func()) {
	go func() {
		defer func() { v.yield <- struct{}{} }()
		f()
	}()
	<-v.yield
}

// AfterFunc runs f as a simulated goroutine once d has passed on the clock.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	t := &vtimer{v: v, f: f}
	t.Reset(d)
	return t
}

type vtimer struct {
	v       *Virtual
	f       func()
	gen     uint64 // settings of the timer: an event of an earlier one is void
	pending bool
}

func (t *vtimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	was := t.pending
	t.pending = false
	t.gen++
	return was
}

func (t *vtimer) Reset(d time.Duration) bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	was := t.pending
	t.gen++
	t.pending = true
	gen := t.gen
	v.pushLocked(v.now.Add(d), func() bool {
		v.mu.Lock()
		due := t.pending && t.gen == gen
		t.pending = t.pending && !due
		v.mu.Unlock()
		if due {
			v.spawn(t.f)
		}
		return due
	})
	return was
}

// Signal returns a channel for Sleep to wait on, which holds one fire.
func (v *Virtual) Signal() chan struct{} { return make(chan struct{}, 1) }

// Fire leaves a fire in ch, unless one is there, and wakes the Sleep
// waiting on it, which takes the fire if the signal is what wakes it.
func (v *Virtual) Fire(ch chan struct{}) {
	v.mu.Lock()
	fire(ch)
	if s := v.waiting[ch]; s != nil {
		v.pushLocked(v.now, func() bool { return v.resume(s, WokeSignal) })
	}
	v.mu.Unlock()
}

type sleeper struct {
	c    chan Woke
	done bool // resumed; requires v.mu held
}

// Sleep hands control back to the loop until t (none if zero), ctx's
// deadline (or its end, if it is done already) or ch's signal, whichever
// comes first. It must be called on a simulated goroutine.
func (v *Virtual) Sleep(ctx context.Context, t time.Time, ch chan struct{}) Woke {
	v.mu.Lock()
	if w := now(ctx, ch); w != WokeTime || (!t.IsZero() && !v.now.Before(t)) {
		v.mu.Unlock()
		return w
	}
	s := &sleeper{c: make(chan Woke, 1)}
	if !t.IsZero() {
		v.pushLocked(t, func() bool { return v.resume(s, WokeTime) })
	}
	if dl, ok := ctx.Deadline(); ok && (t.IsZero() || dl.Before(t)) {
		v.pushLocked(dl, func() bool { return v.resume(s, WokeContext) })
	}
	if ch != nil {
		v.waiting[ch] = s
	}
	v.mu.Unlock()
	v.yield <- struct{}{}
	w := <-s.c
	if ch != nil {
		v.mu.Lock()
		delete(v.waiting, ch)
		if w == WokeSignal {
			<-ch // the fire that woke it: Fire leaves one before it resumes a Sleep
		}
		v.mu.Unlock()
	}
	return w
}

// resume lets sleeper s go on, unless something woke it already, and
// waits until it sleeps again or ends. It reports whether s went on.
func (v *Virtual) resume(s *sleeper, w Woke) bool {
	v.mu.Lock()
	if s.done {
		v.mu.Unlock()
		return false
	}
	s.done = true
	v.mu.Unlock()
	s.c <- w
	<-v.yield
	return true
}

// WithDeadline returns a copy of parent that ends at d on the clock, with
// context.DeadlineExceeded, or when cancel is called.
func (v *Virtual) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	v.mu.Lock()
	v.pushLocked(d, func() bool { cancel(context.DeadlineExceeded); return false })
	v.mu.Unlock()
	return &deadlineCtx{Context: ctx, deadline: d}, func() { cancel(context.Canceled) }
}

type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}
