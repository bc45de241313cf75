// Package clock is the time a Transport runs on: the real clock, or a
// virtual one on which a simulation runs real Transports deterministically
// and faster than real time (see Virtual).
//
// Everything a Transport does with time goes through a Clock: reading it,
// timers, and the waits of its attempt loop. Its decisions take the time as
// a parameter, as golang.org/x/time/rate's do.
package clock

import (
	"context"
	"math"
	"time"
)

// A Clock is the source of time of a Transport.
type Clock interface {
	// Now returns the current time.
	Now() time.Time

	// AfterFunc calls f on a goroutine of its own once d has passed, as
	// time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer

	// Go calls f on a goroutine of its own, now.
	Go(f func())

	// Signal returns a channel for Sleep to wait on, which Fire signals.
	Signal() chan struct{}

	// Fire signals ch, a channel from Signal: it wakes the Sleep waiting
	// on ch, or else the next Sleep on it. It may be called any number of
	// times, from any goroutine; the fires that come before a Sleep wakes
	// wake it once.
	Fire(ch chan struct{})

	// Sleep blocks until t, until ctx is done, or until ch (from Signal;
	// nil for none) is fired, and says which of them ended it. Past t (or
	// with ctx done, or ch fired) it returns at once. The zero t is no
	// time: only ctx or ch ends the Sleep (which then sets no timer).
	// A Sleep may also end with WokeSignal when nothing was fired for it
	// (on the real clock, the timer of the Sleep before it on ch fired as
	// that one ended), so that whoever waits on a signal looks again at
	// what it waits for on waking.
	Sleep(ctx context.Context, t time.Time, ch chan struct{}) Woke
}

// A Timer is a timer made by AfterFunc; its methods are time.Timer's.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// Woke says what ended a Sleep.
type Woke uint8

// What ends a Sleep.
const (
	WokeTime    Woke = iota // its time came
	WokeContext             // its context was done
	WokeSignal              // its signal was fired
)

// A Source is a base RoundTripper that runs the Transport over it on a clock
// and a random source of its own: a simulation's. A Source whose clock is
// Real gives the Transport its random source alone. (Only code inside this
// module can name the interface, so no user's transport matches it.)
type Source interface {
	RetryClock() Clock
	RetryRand() func() float64 // uniform in [0, 1)
}

// Real is the real clock: the time package's.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc returns time.AfterFunc(d, f).
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Go runs f on a new goroutine.
func (Real) Go(f func()) { go f() }

// Signal returns a new channel, which holds one fire for the next Sleep.
func (Real) Signal() chan struct{} { return make(chan struct{}, 1) }

// Fire leaves a fire in ch for the Sleep on it, unless one is there.
func (Real) Fire(ch chan struct{}) { fire(ch) }

func fire(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Sleep waits on ctx and ch, and for t on a timer. With a signal, the timer
// fires it, so that the Sleep waits on two channels and holds no timer's
// channel: what a retry waiting in a budget's line holds, as thousands of
// them may during an outage.
func (Real) Sleep(ctx context.Context, t time.Time, ch chan struct{}) Woke {
	if t.IsZero() {
		select {
		case <-ctx.Done():
			return WokeContext
		case <-ch:
			return WokeSignal
		}
	}
	d := time.Until(t)
	if d <= 0 {
		return now(ctx, ch)
	}
	if ch == nil {
		// A timer's own channel: a retry waiting out its backoff holds
		// some 150 B less than with a channel and a timer function.
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return WokeTime
		case <-ctx.Done():
			return WokeContext
		}
	}
	timer := time.AfterFunc(d, func() { fire(ch) })
	select {
	case <-ctx.Done():
		timer.Stop()
		return WokeContext
	case <-ch:
		if timer.Stop() {
			return WokeSignal
		}
		return WokeTime // the timer fired: its time came, whatever else did
	}
}

// now is what a Sleep whose time has come returns: the signal (taking its
// fire) or the context if either is done already.
func now(ctx context.Context, ch chan struct{}) Woke {
	if ch != nil {
		select {
		case <-ch:
			return WokeSignal
		default:
		}
	}
	if ctx.Err() != nil {
		return WokeContext
	}
	return WokeTime
}

// InBubble reports whether t, just read from the real clock, was read in a
// testing/synctest bubble: the runtime gives the times read there no
// monotonic reading (see runtime/time.go), where time.Now always has one
// outside a bubble. A timer made in a bubble belongs to it, and the runtime
// ends the program when such a timer is stopped or reset outside any
// bubble: what keeps timers from one call to the next must not keep a
// bubble's.
func InBubble(t time.Time) bool { return t == t.Round(0) }

// Mono returns t on the monotonic scale: nanoseconds since a century before
// the process started, by the monotonic clock when t has a reading of it, so
// that 0 comes before any time a Transport sees and a step of the wall clock
// (NTP, a manual change) moves nothing. Counters kept in atomic words (the
// budget's news, throttling's slices) use it.
func Mono(t time.Time) int64 { return monoAt(t.Sub(origin)) }

// MonoNow returns Mono(time.Now()), reading only the monotonic clock, at
// about half the cost of time.Now.
func MonoNow() int64 { return monoAt(time.Since(origin)) }

// MonoNowIn returns MonoNow() and whether it was read in a testing/synctest
// bubble, from the one read: a bubble's clock starts at midnight UTC on
// 2000-01-01 (testing/synctest's doc), so that the time since origin, the
// process's start, is negative there, and nowhere else: the monotonic clock
// never goes back. (On a machine whose clock read a time before 2000 when
// the process started, or in a bubble whose clock has gone past that time,
// some 26 years of its time here, a bubble's reads look like the real
// world's.)
func MonoNowIn() (m int64, bubble bool) {
	d := time.Since(origin)
	return monoAt(d), d < 0
}

// MonoSince returns now on a monotonic scale of the same kind as Mono's
// (0 a century before epoch) that starts at epoch instead of the process's
// start: for the times of a clock other than the real one, whose scale must
// not depend on when the process runs.
func MonoSince(epoch, now time.Time) int64 { return monoAt(now.Sub(epoch)) }

// FromMono returns the time of a value of Mono.
func FromMono(m int64) time.Time { return origin.Add(time.Duration(m - monoOffset)) }

func monoAt(d time.Duration) int64 {
	return min(int64(d), math.MaxInt64-monoOffset) + monoOffset
}

const monoOffset = int64(100 * 365 * 24 * time.Hour)

// origin anchors the monotonic scale. Times taken with time.Now carry a
// monotonic reading, and t.Sub(origin) uses it.
var origin = time.Now()
