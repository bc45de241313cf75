package clock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// MonoNowIn tells a bubble's read from the real world's, as InBubble does
// from a time read, and on the scale Mono gives the time read there: in a
// bubble, an hour later by the bubble's clock is an hour later by it.
func TestMonoNowInTellsABubble(t *testing.T) {
	before := Mono(time.Now())
	m, bubble := MonoNowIn()
	assert.False(t, bubble, "outside a bubble")
	assert.False(t, InBubble(time.Now()))
	assert.LessOrEqual(t, before, m)
	assert.LessOrEqual(t, m, Mono(time.Now()))
	synctest.Test(t, func(t *testing.T) {
		m, bubble := MonoNowIn()
		assert.True(t, bubble, "in a bubble")
		assert.True(t, InBubble(time.Now()))
		assert.Equal(t, Mono(time.Now()), m, "a bubble's time stands still until its goroutines block")
		time.Sleep(time.Hour)
		m2, _ := MonoNowIn()
		assert.Equal(t, int64(time.Hour), m2-m)
	})
}

// The real clock's Sleep, in fake time: what ends it, and when. Fires that
// come before a Sleep wakes wake it once, and a Sleep that ends leaves
// nothing behind (its timer's fire taken, or its timer stopped) to wake the
// next Sleep on the signal early.
func TestRealSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Real
		bg := context.Background()
		canceled, cancel := context.WithCancel(bg)
		cancel()
		ch := r.Signal()
		start := time.Now()
		took := func() time.Duration { d := time.Since(start); start = time.Now(); return d }

		r.Fire(ch)
		r.Fire(ch)
		assert.Equal(t, WokeSignal, r.Sleep(bg, time.Now().Add(time.Hour), ch))
		assert.Equal(t, time.Duration(0), took())
		assert.Equal(t, WokeTime, r.Sleep(bg, time.Now().Add(time.Second), ch), "the two fires woke one Sleep")
		assert.Equal(t, time.Second, took())

		time.AfterFunc(5*time.Millisecond, func() { r.Fire(ch) })
		assert.Equal(t, WokeSignal, r.Sleep(bg, time.Now().Add(time.Hour), ch))
		assert.Equal(t, 5*time.Millisecond, took())
		assert.Equal(t, WokeTime, r.Sleep(bg, time.Now().Add(time.Second), ch), "the Sleep fired stopped its timer")
		assert.Equal(t, time.Second, took())

		later, cancelLater := context.WithTimeout(bg, 30*time.Millisecond)
		defer cancelLater()
		assert.Equal(t, WokeContext, r.Sleep(later, time.Time{}, ch), "the timer's fire was taken")
		assert.Equal(t, 30*time.Millisecond, took())

		soon, cancelSoon := context.WithTimeout(bg, 5*time.Millisecond)
		defer cancelSoon()
		assert.Equal(t, WokeContext, r.Sleep(soon, time.Now().Add(time.Hour), ch))
		assert.Equal(t, WokeTime, r.Sleep(bg, time.Now().Add(time.Second), ch), "the Sleep its context ended stopped its timer")
		assert.Equal(t, 5*time.Millisecond+time.Second, took())

		assert.Equal(t, WokeContext, r.Sleep(canceled, time.Now().Add(time.Hour), nil))
		assert.Equal(t, WokeTime, r.Sleep(bg, time.Now().Add(-time.Second), nil))
		assert.Equal(t, WokeTime, r.Sleep(bg, time.Now().Add(time.Second), nil))
		assert.Equal(t, time.Second, took())
		// The zero time is none: only the context or the signal ends the Sleep.
		assert.Equal(t, WokeContext, r.Sleep(canceled, time.Time{}, r.Signal()))
		r.Fire(ch)
		assert.Equal(t, WokeSignal, r.Sleep(bg, time.Time{}, ch))
	})
}
