package testutil

// What a request may leave behind when it is over, made visible: the
// goroutines of a testing/synctest bubble, the timers a Transport left
// armed (TimerClock), and the contexts it made and never canceled, which
// run a goroutine under a caller's context of a type the context package
// does not know (OpaqueCtx). The simulation (internal/sim) checks them
// after each request.

import (
	"bytes"
	"context"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// Census returns the tag of the bubble the caller runs in and the
// headers of the other goroutines in it.
func Census() (bubble string, others map[string]bool) {
	others = make(map[string]bool)
	for i, g := range GoroutineStacks() {
		header, _, _ := strings.Cut(g, "\n")
		if i == 0 {
			_, tag, _ := strings.Cut(header, "synctest bubble ")
			bubble = "synctest bubble " + tag
			continue
		}
		if strings.Contains(header, bubble) {
			others[GoroutineID(header)] = true
		}
	}
	return bubble, others
}

// GoroutineID returns the "goroutine N" of a stack's header.
func GoroutineID(header string) string {
	id, _, _ := strings.Cut(header, " [")
	return id
}

// GoroutineStacks returns the stack of every goroutine, the caller's first.
func GoroutineStacks() []string {
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

// A TimerClock is the real clock (fake time in a bubble) keeping the
// timers set through it that neither fired nor were stopped. A base that
// is a clock.Source runs the Transport above it on one: its attempt
// timeouts, hedge timers and the cut-offs of its drains go through it.
type TimerClock struct {
	clock.Real
	mu      sync.Mutex
	pending map[*trackedTimer]string // by the name of the timer's function
}

// NewTimerClock returns a TimerClock with no timer armed.
func NewTimerClock() *TimerClock { return &TimerClock{pending: make(map[*trackedTimer]string)} }

type trackedTimer struct {
	c *TimerClock
	t *time.Timer
}

// AfterFunc returns time.AfterFunc(d, f), kept until it fires or is
// stopped.
func (c *TimerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
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

func (c *TimerClock) settle(st *trackedTimer) {
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

// Left returns the names of the functions of the timers pending.
func (c *TimerClock) Left() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.pending))
}

// ---- contexts ----

// An OpaqueCtx is a caller's context of a type the context package does
// not know: a context made from it (WithCancel) runs a goroutine until it
// is canceled, so that one a Transport forgot to cancel shows as a leaked
// goroutine.
type OpaqueCtx struct {
	context.Context
	done chan struct{}
}

// NewOpaqueCtx returns an OpaqueCtx that ends when parent does.
func NewOpaqueCtx(parent context.Context) *OpaqueCtx {
	c := &OpaqueCtx{Context: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { close(c.done) })
	return c
}

// Done returns a channel closed once the parent is done.
func (c *OpaqueCtx) Done() <-chan struct{} { return c.done }

// Err returns the parent's error once Done is closed, else nil.
func (c *OpaqueCtx) Err() error {
	select {
	case <-c.done:
		return c.Context.Err()
	default:
		return nil
	}
}
