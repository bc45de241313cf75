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

// fail reports a failure of l's host by a request of its own, now.
func fail(l *Account) {
	var id uint64
	l.Failure(time.Now(), &id)
}

// waited is what became of a retry in line: when its Wait ended, since the
// world's start, whether it was let go, and whether its release was paid.
type waited struct {
	at             time.Duration
	released, paid bool
}

// inLine puts a retry in l's line at d (one a millisecond apart, so that
// goroutines started at one instant do not race for their places), with
// pace and until (since the start), and records in *out what became of it.
func (w *world) inLine(l *Account, d, pace, until time.Duration, out *waited) {
	w.after(d, func() {
		out.released, out.paid = l.Wait(w.clk, context.Background(), w.start.Add(until), pace)
		out.at = w.clk.Now().Sub(w.start)
	})
}

// successScenario: a host with credit for two retries and another request
// in flight; four retries join its line at 0 to 3 ms. At 10 ms a first
// attempt succeeds: it lets the two oldest go, all the credit pays for. At
// 20 ms another succeeds, and lets none go (its ratio, 0, earns nothing).
// At 30 ms the second's retry succeeds: it gives its retry back, which lets
// the third go; the fourth waits on (no credit, and no silence of its
// backoff, 1 s) until its time in line ends at 50 ms, and goes, unpaid, the
// host having answered last.
func successScenario(w *world) [4]waited {
	l := New(0, 2).Start("h")
	var out [4]waited
	for i := range out {
		until := time.Minute
		if i == 3 {
			until = ms(50)
		}
		w.inLine(l, ms(i), time.Second, until, &out[i])
	}
	w.after(ms(10), func() { l.Success(w.clk, false) })
	w.after(ms(20), func() { l.Success(w.clk, false) })
	w.after(ms(30), func() { l.Success(w.clk, true) })
	w.run()
	l.End()
	return out
}

func TestASuccessLetsGoTheOldestRetriesTheCreditPaysFor(t *testing.T) {
	want := [4]waited{{ms(10), true, true}, {ms(10), true, true}, {ms(30), true, true}, {ms(50), true, false}}
	synctest.Test(t, func(t *testing.T) {
		assert.Equal(t, want, successScenario(realWorld()), "on the real clock, in fake time")
	})
	assert.Equal(t, want, successScenario(virtualWorld()), "on a virtual clock, at the same instants")
}

// With no news of the host, the head of the line goes as a probe after a
// silence of its own longest backoff, counted from the line's start
// (100 ms), and the next head after its own (200 ms) from that probe's
// release. A failure reported at 320 ms is news: it pushes the third's
// probe (pace 100 ms) from 400 ms to 420 ms.
func TestProbesGoAtTheHeadsBackoffPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := realWorld()
		l := New(0, 0).Start("h")
		var out [3]waited
		w.inLine(l, 0, ms(100), time.Minute, &out[0])
		w.inLine(l, ms(1), ms(200), time.Minute, &out[1])
		w.inLine(l, ms(2), ms(100), time.Minute, &out[2])
		w.after(ms(320), func() { fail(l) })
		w.run()
		assert.Equal(t, [3]waited{{ms(100), true, false}, {ms(300), true, false}, {ms(420), true, false}}, out)
		l.End()
	})
}

// A retry whose time in line runs out goes if the host's last outcome was a
// success (the line held it while the host answered), and is refused if it
// was a failure. With no credit, the success at 10 ms lets nothing go
// before then.
func TestAtItsTimesEndARetryGoesOnlyIfTheHostAnsweredLast(t *testing.T) {
	for _, failed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			w := realWorld()
			l := New(0, 0).Start("h")
			var out waited
			w.inLine(l, 0, time.Second, ms(50), &out)
			w.after(ms(10), func() { l.Success(w.clk, false) })
			if failed {
				w.after(ms(20), func() { fail(l) })
			}
			w.run()
			assert.Equal(t, waited{ms(50), !failed, false}, out, "failed last: %v", failed)
			l.End()
		})
	}
}

// A Wait ends with its context, and its ticket leaves the line: the next
// retry, which becomes the head, is not held behind it.
func TestWaitEndsWithItsContext(t *testing.T) {
	v := clock.NewVirtual(t0)
	l := New(0, 0).Start("h")
	ctx, cancel := v.WithDeadline(context.Background(), t0.Add(ms(50)))
	defer cancel()
	var first, second bool
	var firstEnded, secondEnded time.Time
	v.Go(func() {
		first, _ = l.Wait(v, ctx, t0.Add(time.Minute), time.Second)
		firstEnded = v.Now()
	})
	v.At(t0.Add(ms(20)), func() {
		second, _ = l.Wait(v, context.Background(), t0.Add(time.Minute), ms(100))
		secondEnded = v.Now()
	})
	v.Run()
	assert.False(t, first)
	sameTime(t, t0.Add(ms(50)), firstEnded, "at its deadline")
	assert.True(t, second)
	sameTime(t, t0.Add(ms(100)), secondEnded, "its probe, 100 ms after the line formed: not held behind the first")
	assert.Empty(t, l.line)
	l.End()
}

// A Wait whose context is done returns at once, not let go; one that
// starts with its time run out (a failed body read past it) takes the
// time-up rule at once: let go while the host's last outcome was a
// success, refused after a failure. Neither stays in the line.
func TestAWaitOutOfTimeDecidesAtOnce(t *testing.T) {
	l := New(0, 0).Start("h")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	released, _ := l.Wait(clock.Real{}, ctx, time.Time{}, 0)
	assert.False(t, released, "its context done")
	past := time.Now().Add(-time.Second)
	released, _ = l.Wait(clock.Real{}, context.Background(), past, 0)
	assert.True(t, released, "the host's last outcome a success")
	var id uint64
	l.Failure(time.Now(), &id)
	released, _ = l.Wait(clock.Real{}, context.Background(), past, 0)
	assert.False(t, released, "the host's last outcome a failure")
	assert.Zero(t, l.waiting.Load())
	l.End()
}

// A Budget used in one testing/synctest bubble and then in another works in
// both: each waiting retry sleeps on its own bubble's clock, so nothing of
// the first bubble is left to wait on.
func TestWaitsInTwoBubbles(t *testing.T) {
	b := New(0, 0)
	for range 2 {
		synctest.Test(t, func(t *testing.T) {
			l := b.Start("h")
			start := time.Now()
			released, _ := l.Wait(clock.Real{}, context.Background(), start.Add(time.Minute), ms(100))
			assert.True(t, released)
			// A probe after 100 ms without news; in the second bubble, whose
			// clock starts at the same instant, the last news is the first
			// bubble's probe, at 100 ms.
			assert.LessOrEqual(t, time.Since(start), ms(200))
			l.End()
		})
	}
}

// Many waits, released, expired and canceled at once from several
// goroutines: each ends once, and the line is empty after.
func TestManyWaitsEndOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(0, 10).Start("h")
		var wg sync.WaitGroup
		var mu sync.Mutex
		ends := 0
		for i := range 300 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*ms(30))
				defer cancel()
				l.Wait(clock.Real{}, ctx, time.Now().Add(time.Duration(i%5)*ms(40)), ms(i%3*50))
				mu.Lock()
				ends++
				mu.Unlock()
			})
			if i%50 == 0 {
				l.Success(clock.Real{}, true)
			}
		}
		wg.Wait()
		assert.Equal(t, 300, ends)
		assert.Empty(t, l.line)
		assert.Zero(t, l.waiting.Load())
		l.End()
	})
}

// A nil Account lets every retry go at once, paid.
func TestANilAccountWaitsForNothing(t *testing.T) {
	var l *Account
	released, paid := l.Wait(clock.Real{}, context.Background(), time.Time{}, 0)
	assert.True(t, released)
	assert.True(t, paid)
}

// A release at a retry's time's end is news too: the head's probe waits its
// silence from it. With no credit, H (its backoff's longest wait 1 s) and X
// (its time ending at 500 ms) wait; a success at 100 ms lets neither go, and
// X goes at 500 ms, the host having answered last: H probes at 1.5 s, not
// 1.1 s.
func TestAReleaseAtATimesEndIsNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := realWorld()
		l := New(0, 0).Start("h")
		var h, x waited
		w.inLine(l, 0, time.Second, time.Minute, &h)
		w.inLine(l, ms(1), time.Second, ms(500), &x)
		w.after(ms(100), func() { l.Success(w.clk, false) })
		w.run()
		assert.Equal(t, waited{ms(500), true, false}, x)
		assert.Equal(t, waited{ms(1500), true, false}, h)
		l.End()
	})
}
