package budget

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A world runs goroutines on a clock: the real one (in a synctest bubble)
// or a virtual one.
type world struct {
	clk   clock.Clock
	start time.Time
	after func(d time.Duration, f func()) // runs f on a goroutine d after start
	run   func()                          // until every goroutine has ended
}

func realWorld() *world {
	var wg sync.WaitGroup
	start := time.Now()
	return &world{clk: clock.Real{}, start: start,
		after: func(d time.Duration, f func()) {
			wg.Go(func() {
				time.Sleep(time.Until(start.Add(d)))
				f()
			})
		},
		run: wg.Wait,
	}
}

func virtualWorld() *world {
	v := clock.NewVirtual(t0)
	return &world{clk: v, start: t0,
		after: func(d time.Duration, f func()) { v.At(t0.Add(d), f) },
		run:   func() { v.Run() },
	}
}

// waitScenario: the credit is spent and four retries join the line in its
// first milliseconds (one a millisecond, so that goroutines started at one
// instant do not race for their places), the last of them waiting only
// until 320 ms. 100 ms after the line formed, with no news of the host,
// its head goes as a probe. At 250 ms a first attempt succeeds: a
// recovery, whose first round releases 2 retries, spread over its 100 ms
// (at 250 and 300 ms). The fourth retry gives up at 320 ms. It returns
// when each Wait ended, since the start, and what it returned.
func waitScenario(w *world) (ended [4]time.Duration, ok [4]bool) {
	b := New(0.2, 1)
	b.Retry("", w.clk.Now())
	for i := range ended {
		until := w.start.Add(time.Minute)
		if i == 3 {
			until = w.start.Add(320 * time.Millisecond)
		}
		w.after(time.Duration(i)*time.Millisecond, func() {
			ok[i] = b.Wait(w.clk, nil, "", context.Background(), until, false)
			ended[i] = w.clk.Now().Sub(w.start)
		})
	}
	w.after(250*time.Millisecond, func() { b.Succeeded(w.clk, "", 1) })
	w.run()
	return ended, ok
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// The budget's wait and its timer run on a virtual clock: the retries in
// line are let go at the exact virtual instants the probe and the recovery
// are due.
func TestWaitOnAVirtualClock(t *testing.T) {
	ended, ok := waitScenario(virtualWorld())
	assert.Equal(t, [4]time.Duration{ms(100), ms(250), ms(300), ms(320)}, ended)
	assert.Equal(t, [4]bool{true, true, true, false}, ok)
}

// The same code on the real clock, in fake time, lets them go at the same
// instants.
func TestWaitInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended, ok := waitScenario(realWorld())
		assert.Equal(t, [4]time.Duration{ms(100), ms(250), ms(300), ms(320)}, ended)
		assert.Equal(t, [4]bool{true, true, true, false}, ok)
	})
}

// A Wait ends with its context, and its ticket leaves the line: the next
// retry is not held behind it.
func TestWaitEndsWithItsContext(t *testing.T) {
	v := clock.NewVirtual(t0)
	b := New(0, 0)
	ctx, cancel := v.WithDeadline(context.Background(), t0.Add(ms(50)))
	defer cancel()
	var first, second bool
	var firstEnded, secondEnded time.Time
	v.Go(func() {
		first = b.Wait(v, nil, "", ctx, t0.Add(time.Minute), false)
		firstEnded = v.Now()
	})
	v.At(t0.Add(ms(20)), func() {
		second = b.Wait(v, nil, "", context.Background(), t0.Add(time.Minute), false)
		secondEnded = v.Now()
	})
	v.Run()
	assert.False(t, first)
	sameTime(t, t0.Add(ms(50)), firstEnded, "at its deadline")
	assert.True(t, second)
	sameTime(t, t0.Add(ms(100)), secondEnded, "the probe, 100 ms after the line formed: not held behind the first")
}
