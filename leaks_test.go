package retryhttp

// What a request may leave behind when it is over, made visible: the
// goroutines of a testing/synctest bubble, the timers a Transport left
// armed (timerClock), and the contexts it made and never canceled, which
// run a goroutine under a caller's context of a type the context package
// does not know (opaqueCtx). The simulation (internal/sim) checks them after
// each request, and so do the tests of what it found.

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// census returns the tag of the bubble the caller runs in and the
// headers of the other goroutines in it.
func census() (bubble string, others map[string]bool) {
	others = make(map[string]bool)
	for i, g := range goroutineStacks() {
		header, _, _ := strings.Cut(g, "\n")
		if i == 0 {
			_, tag, _ := strings.Cut(header, "synctest bubble ")
			bubble = "synctest bubble " + tag
			continue
		}
		if strings.Contains(header, bubble) {
			others[goroutineID(header)] = true
		}
	}
	return bubble, others
}

// goroutineID returns the "goroutine N" of a stack's header.
func goroutineID(header string) string {
	id, _, _ := strings.Cut(header, " [")
	return id
}

// goroutineStacks returns the stack of every goroutine, the caller's first.
func goroutineStacks() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(bytes.TrimSpace(buf[:n])), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// ---- timers ----

// timerClock is the real clock (fake time in a bubble) keeping the timers
// a Transport set and that neither fired nor were stopped. A base that is
// a clock.Source runs the Transport above it on one.
type timerClock struct {
	clock.Real
	mu      sync.Mutex
	pending map[*trackedTimer]string // by the name of the timer's function
}

// newTimerClock returns a timerClock with no timer armed.
func newTimerClock() *timerClock { return &timerClock{pending: make(map[*trackedTimer]string)} }

type trackedTimer struct {
	c *timerClock
	t *time.Timer
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	st := &trackedTimer{c: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[st] = name
	st.t = time.AfterFunc(d, func() {
		c.settle(st)
		f()
	})
	return st
}

func (c *timerClock) settle(st *trackedTimer) {
	c.mu.Lock()
	delete(c.pending, st)
	c.mu.Unlock()
}

func (st *trackedTimer) Stop() bool {
	stopped := st.t.Stop()
	if stopped {
		st.c.settle(st)
	}
	return stopped
}

func (st *trackedTimer) Reset(d time.Duration) bool {
	st.c.mu.Lock()
	st.c.pending[st] = "reset"
	st.c.mu.Unlock()
	return st.t.Reset(d)
}

// left returns the names of the timers pending.
func (c *timerClock) left() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, name := range c.pending {
		names = append(names, name)
	}
	return names
}

// ---- contexts ----

// opaqueCtx is a caller's context of a type net/http's context package does
// not know: a context made from it (WithCancel) runs a goroutine until it
// is canceled, so that one the Transport forgot to cancel shows as a
// leaked goroutine.
type opaqueCtx struct {
	context.Context
	done chan struct{}
}

func newOpaqueCtx(parent context.Context) *opaqueCtx {
	c := &opaqueCtx{Context: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { close(c.done) })
	return c
}

func (c *opaqueCtx) Done() <-chan struct{} { return c.done }

func (c *opaqueCtx) Err() error {
	select {
	case <-c.done:
		return c.Context.Err()
	default:
		return nil
	}
}
