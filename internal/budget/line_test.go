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

// queue puts n tickets that nobody sleeps on in l's line at now, for a test
// that moves the line by hand with Advance.
func queue(l *Account, now time.Time, n int) []*Ticket {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	ts := make([]*Ticket, n)
	for i := range ts {
		ts[i] = new(Ticket)
		l.enqueueLocked(now, ts[i])
	}
	return ts
}

// downLine starts b's account of host "h", reports a failure on it at 0 and
// puts n tickets in its line then (see queue).
func downLine(b *Budget, n int) (*Account, []*Ticket) {
	l := b.Start("h")
	var id uint64
	l.Failure(at(0), &id)
	return l, queue(l, at(0), n)
}

// released counts the tickets let go.
func released(ts []*Ticket) int {
	n := 0
	for _, t := range ts {
		if t.released {
			n++
		}
	}
	return n
}

// With no news of the host, the retry at the head of the line goes as a
// probe after a silence of its own longest backoff (100 ms for a retry
// that says none), and so does each next head after it; any outcome
// reported pushes the next probe back.
func TestProbesAtBackoffPace(t *testing.T) {
	l, ts := downLine(New(0, 0), 10)
	var id uint64
	sameTime(t, at(ms(100)), l.Advance(at(0)))
	l.Advance(at(ms(99)))
	assert.Zero(t, released(ts))
	sameTime(t, at(ms(200)), l.Advance(at(ms(100))))
	assert.Equal(t, 1, released(ts), "the first probe")
	l.Failure(at(ms(150)), &id) // the probe failed: news
	l.Advance(at(ms(200)))
	assert.Equal(t, 1, released(ts), "the failure pushed the next probe back")
	sameTime(t, at(ms(250)), l.Advance(at(ms(249))))
	next := l.Advance(at(ms(250)))
	assert.Equal(t, 2, released(ts), "the second probe, 100 ms after the news")
	for i := range 5 {
		assert.Equal(t, ms(100), next.Sub(clock.FromMono(l.news)), "gap %d", i)
		next = l.Advance(next)
		assert.Equal(t, 3+i, released(ts), "probe %d", 3+i)
	}
	l.End()
}

// Jitter stretches each probe's silence by a factor in [1, 2), drawn anew
// with each probe.
func TestProbesAreJittered(t *testing.T) {
	l := New(0, 0).Start("h")
	draws := []float64{0.5, 0.25}
	l.rnd = func() float64 { u := draws[0]; draws = draws[1:]; return u }
	ts := queue(l, at(0), 2)
	sameTime(t, at(ms(150)), l.Advance(at(0)), "100 ms x 1.5")
	sameTime(t, at(ms(150+125)), l.Advance(at(ms(150))), "then 100 ms x 1.25")
	assert.Equal(t, 1, released(ts))
	l.End()
}

// A host's first success with retries in line starts a recovery, whose
// first release goes at once; each later success lets one more go if the
// credit pays for it, besides the ramp: the retries of a host failing part
// of its attempts go as their credit is earned.
func TestEachSuccessLetsAPaidRetryGo(t *testing.T) {
	l := New(0.5, 1).Start("h")
	assert.True(t, l.Spend(at(0)))
	ts := queue(l, at(0), 10)
	l.recover(at(ms(1)), 1)
	assert.Equal(t, 1, released(ts), "the ramp's first release")
	l.earn(unit / 2)
	l.recover(at(ms(2)), 1) // half a retry earned: not yet paid
	assert.Equal(t, 1, released(ts))
	l.earn(unit / 2)
	l.recover(at(ms(2)), 1) // a whole retry: one goes
	assert.Equal(t, 2, released(ts))
	l.recover(at(ms(3)), 1)
	assert.Equal(t, 2, released(ts), "the credit is spent again")
	l.Advance(at(ms(51)))
	assert.Equal(t, 3, released(ts), "the ramp's second release, half a round later")
	l.End()
}

// After a host was silent of successes for a long outage, its successes
// pay no waiting retry: the gentle ramp alone lets the line go, one at
// first.
func TestAfterALongOutageOnlyTheRampLetsTheLineGo(t *testing.T) {
	l, ts := downLine(New(1, 10), 10)
	for i := range 5 {
		l.recover(at(longOutage+time.Second+time.Duration(i)), 1)
		assert.Equal(t, 1, released(ts), "the ramp starts with one; no success paid a retry")
	}
	l.Advance(at(longOutage + time.Second + round - 1))
	assert.Equal(t, 1, released(ts), "one in the first round")
	l.End()
}

// A success while retries wait starts a recovery: 2 releases in the first
// 100 ms round; once an attempt failed in it, each round lets go twice the
// retries that succeeded in the round before while none failed, half of
// them once some did, and the recovery ends with a round that has no
// success. (A budget that earns no credit: the ramp alone.)
func TestRecoveryRamps(t *testing.T) {
	l, ts := downLine(New(0, 0), 1000)
	var id uint64
	at := func(n int) time.Time { return at(ms(n)) }

	l.recover(at(10), 1) // a first attempt's success: news, and a recovery
	assert.Equal(t, 1, released(ts), "the first release goes at once")
	sameTime(t, at(60), l.Advance(at(10)))
	l.Failure(at(11), &id) // the host, back, fails again: the round lets no more go
	sameTime(t, at(110), l.Advance(at(11)))
	l.recover(at(12), 2) // the released retry succeeded
	for range 50 {
		l.recover(at(13), 1) // the client's other traffic does not feed the ramp
	}
	l.Advance(at(109))
	assert.Equal(t, 1, released(ts))

	// Round 2, after a failure: half the 1 success, at least 1.
	l.Advance(at(110))
	assert.Equal(t, 2, released(ts))
	l.recover(at(111), 2)
	sameTime(t, at(210), l.Advance(at(111)))
	// Round 3, none failed in round 2: twice its 1 success, one every 50 ms.
	l.Advance(at(259))
	assert.Equal(t, 3, released(ts))
	l.Advance(at(260))
	assert.Equal(t, 4, released(ts))
	l.recover(at(261), 2)
	l.recover(at(262), 2)
	// Round 4: 4 releases, one every 25 ms; they succeed, but 2 attempts fail.
	l.Advance(at(409))
	assert.Equal(t, 8, released(ts))
	for range 4 {
		l.recover(at(409), 3)
	}
	l.Failure(at(409), &id)
	l.Failure(at(409), &id)
	// Round 5: half the 4 successes.
	l.Advance(at(509))
	assert.Equal(t, 10, released(ts))
	// Round 6 follows a round without a retry's success: the recovery ends
	// at 510 ms, and the line is back to probes: 100 ms of silence after
	// the last news (ms 409) have passed, and one goes.
	l.Advance(at(509))
	assert.Equal(t, 10, released(ts), "a recovery lets go no probe")
	l.Advance(at(510))
	assert.Equal(t, 11, released(ts), "a probe")
	l.End()
}

// A recovery in which no attempt has failed yet is a host back from a
// short outage: each retry's success lets two more go in the round
// besides, as they fit in its spread; the first failure after it stops
// the round's releases.
func TestACleanRecoveryRampsWithEachSuccess(t *testing.T) {
	l, ts := downLine(New(0, 0), 20)
	var id uint64
	at := func(n int) time.Time { return at(ms(n)) }

	l.recover(at(0), 1)
	assert.Equal(t, 1, released(ts), "the first release goes at once")
	l.recover(at(10), 2) // it succeeded: 4 in the round, one every 25 ms
	sameTime(t, at(25), l.Advance(at(10)))
	l.Advance(at(25))
	assert.Equal(t, 2, released(ts))
	l.recover(at(30), 2)
	l.recover(at(31), 2) // 8 in the round, one every 12.5 ms from its start
	l.Advance(at(31))
	assert.Equal(t, 3, released(ts), "the 3rd's turn, at 25 ms, has come")
	l.Advance(at(37))
	assert.Equal(t, 3, released(ts))
	l.Advance(at(38))
	assert.Equal(t, 4, released(ts), "the 4th at 37.5 ms")
	l.Failure(at(40), &id)
	l.Advance(at(99))
	assert.Equal(t, 4, released(ts), "the host failed again: no more in this round")
	l.End()
}

// A probe's silence is the longest wait of the retry at the head of the
// line: a probe goes no later than that retry's own backoff would have
// let it (here 30 ms, where a retry that says none waits 100 ms).
func TestAProbeGoesAtTheHeadsPace(t *testing.T) {
	l := New(0, 0).Start("h")
	var id uint64
	l.Failure(at(0), &id)
	head, next := &Ticket{pace: ms(30)}, &Ticket{pace: ms(500)}
	l.b.mu.Lock()
	l.enqueueLocked(at(0), head)
	l.enqueueLocked(at(0), next)
	l.b.mu.Unlock()
	sameTime(t, at(ms(30)), l.Advance(at(ms(29))))
	l.Advance(at(ms(30)))
	assert.True(t, head.released, "the probe, at the head's 30 ms")
	sameTime(t, at(ms(530)), l.Advance(at(ms(30))), "the next head's, 500 ms after the news")
	l.End()
}

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

// waitScenario: another request is in flight and the credit is spent; four
// retries join the line in its first milliseconds (one a millisecond, so
// that goroutines started at one instant do not race for their places),
// the last of them waiting only until 320 ms. 100 ms after the line formed,
// with no news of the host, its head goes as a probe, and 100 ms later
// the next head. At 250 ms a first attempt succeeds: a recovery, whose
// first round releases 2 retries, spread over its 100 ms (at 250 and
// 300 ms): the fourth goes 20 ms before it would have given up. It returns
// when each Wait ended, since the start, and what it returned.
func waitScenario(w *world) (ended [4]time.Duration, ok [4]bool) {
	l := New(0.2, 1).Start("h")
	l.Spend(w.clk.Now())
	for i := range ended {
		until := w.start.Add(time.Minute)
		if i == 3 {
			until = w.start.Add(320 * time.Millisecond)
		}
		w.after(time.Duration(i)*time.Millisecond, func() {
			ok[i] = l.Wait(w.clk, nil, context.Background(), until, 0)
			ended[i] = w.clk.Now().Sub(w.start)
		})
	}
	w.after(250*time.Millisecond, func() { l.Success(w.clk, 1) })
	w.run()
	l.End()
	return ended, ok
}

// The lines's waits run on a virtual clock: the retries in line are let go
// at the exact virtual instants the probe and the recovery are due.
func TestWaitOnAVirtualClock(t *testing.T) {
	ended, ok := waitScenario(virtualWorld())
	assert.Equal(t, [4]time.Duration{ms(100), ms(200), ms(250), ms(300)}, ended)
	assert.Equal(t, [4]bool{true, true, true, true}, ok)
}

// The same code on the real clock, in fake time, lets them go at the same
// instants.
func TestWaitInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended, ok := waitScenario(realWorld())
		assert.Equal(t, [4]time.Duration{ms(100), ms(200), ms(250), ms(300)}, ended)
		assert.Equal(t, [4]bool{true, true, true, true}, ok)
	})
}

// lastCallScenario: the credit is spent and another request is in flight;
// three retries join the line at 0, 1 and 2 ms, the third waiting only
// until 30 ms. At 10 ms a first attempt succeeds: a recovery, whose first
// round lets the head go at once and the next at 60 ms. If failAt is set,
// an attempt fails then. It returns when the third Wait ended and what it
// returned.
func lastCallScenario(failAt time.Duration) (ended time.Duration, ok bool) {
	v := clock.NewVirtual(t0)
	l := New(0.2, 1).Start("h")
	l.Spend(t0)
	for i := range 3 {
		until := t0.Add(200 * time.Millisecond)
		if i == 2 {
			until = t0.Add(ms(30))
		}
		v.At(t0.Add(ms(i)), func() {
			got := l.Wait(v, nil, context.Background(), until, 0)
			if i == 2 {
				ended, ok = v.Now().Sub(t0), got
			}
		})
	}
	v.At(t0.Add(ms(10)), func() { l.Success(v, 1) })
	if failAt > 0 {
		v.At(t0.Add(failAt), func() {
			var id uint64
			l.Failure(v.Now(), &id)
		})
	}
	v.Run()
	l.End()
	return ended, ok
}

// A retry whose time in line runs out while its host recovers, none of its
// attempts failing since it came back, goes then rather than fail: the
// line held it only to pace a host that answers. Once an attempt failed in
// the recovery, it is refused.
func TestARetryOutOfTimeInACleanRecoveryGoes(t *testing.T) {
	ended, ok := lastCallScenario(0)
	assert.True(t, ok, "the host answers: it goes")
	assert.Equal(t, ms(30), ended)
	ended, ok = lastCallScenario(ms(20))
	assert.False(t, ok, "an attempt failed since the host came back: refused")
	assert.Equal(t, ms(30), ended)
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
		first = l.Wait(v, nil, ctx, t0.Add(time.Minute), 0)
		firstEnded = v.Now()
	})
	v.At(t0.Add(ms(20)), func() {
		second = l.Wait(v, nil, context.Background(), t0.Add(time.Minute), 0)
		secondEnded = v.Now()
	})
	v.Run()
	assert.False(t, first)
	sameTime(t, t0.Add(ms(50)), firstEnded, "at its deadline")
	assert.True(t, second)
	sameTime(t, t0.Add(ms(100)), secondEnded, "the probe, 100 ms after the line formed: not held behind the first")
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
			assert.True(t, l.Wait(clock.Real{}, nil, context.Background(), start.Add(time.Minute), 0))
			// A probe after 100 ms without news in the first bubble; in the
			// second, whose clock starts at the same instant, the account's
			// pace has doubled and its last news is the first's probe.
			assert.LessOrEqual(t, time.Since(start), ms(300))
			l.End()
		})
	}
}

// Many waits, released, expired and canceled at once from several
// goroutines: each ends once, and the line is empty after.
func TestManyWaitsEndOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(0, 0).Start("h")
		var wg sync.WaitGroup
		var mu sync.Mutex
		ends := 0
		for i := range 300 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*ms(30))
				defer cancel()
				l.Wait(clock.Real{}, nil, ctx, time.Now().Add(time.Duration(i%5)*ms(40)), 0)
				mu.Lock()
				ends++
				mu.Unlock()
			})
			if i%50 == 0 {
				l.Success(clock.Real{}, 2)
			}
		}
		wg.Wait()
		assert.Equal(t, 300, ends)
		assert.Empty(t, l.line)
		assert.Zero(t, l.waiting.Load())
		l.End()
	})
}

// An outcome counts in the round it comes in, though the line has not
// moved since the round before ended: a retry's success after a round
// without one starts a new recovery, whose first release goes at once.
func TestAnOutcomeCountsInItsRound(t *testing.T) {
	l := New(0, 0).Start("h")
	ts := queue(l, at(0), 10)
	l.recover(at(0), 1)
	l.Advance(at(ms(50)))
	assert.Equal(t, 2, released(ts), "the first round's two")
	l.recover(at(ms(150)), 2) // in the second round; the first had no retry's success
	assert.Equal(t, 3, released(ts), "the recovery ended with the first round, and starts again")
	l.End()
}

// A release from the line is a retry: it spends a retry of the credit when
// the credit has one, and goes all the same when it has none.
func TestALineReleaseSpendsWhatCreditThereIs(t *testing.T) {
	l, ts := downLine(New(0, 2), 3)
	l.recover(at(0), 1)
	assert.Equal(t, 1, released(ts))
	assert.EqualValues(t, unit, l.spent.Load(), "the ramp's first release spent a retry")
	l.Advance(at(ms(50)))
	assert.Equal(t, 2, released(ts))
	assert.EqualValues(t, 2*unit-unit/100, l.spent.Load(), "the second too, less 50 ms of refill (a retry in 5 s)")
	l.recover(at(ms(51)), 2) // a retry succeeded, none failed: the line may go
	l.Advance(at(ms(70)))
	assert.Equal(t, 3, released(ts), "the third goes, unpaid")
	assert.EqualValues(t, 2*unit-unit*14/1000, l.spent.Load(), "70 ms of refill, and nothing spent")
	l.End()
}

// Advancing a line nobody waits in lets nothing go and spends nothing,
// whether the account never had a line or its recovery let the whole line go.
func TestAdvanceWithNobodyInLineLetsNothingGo(t *testing.T) {
	l := New(0, 2).Start("h")
	assert.True(t, l.Advance(at(time.Hour)).IsZero(), "no line: never due")
	assert.Equal(t, 2, spend(l, at(time.Hour), 10), "nothing spent")

	l = New(0, 2).Start("h")
	ts := queue(l, at(0), 1)
	l.recover(at(0), 1)
	assert.Equal(t, 1, released(ts), "the ramp's first release empties the line")
	assert.True(t, l.Advance(at(ms(50))).IsZero(), "the round's second release finds nobody")
	assert.Equal(t, 1, spend(l, at(ms(50)), 10), "only the first release spent a retry")
	l.End()
}

// The first failure in a recovery, coming at a round's start before the
// round let any retry go, lets none go in that round; the round has no
// retry's success, so the line is back to probes after it.
func TestAFailureBeforeARoundsFirstReleaseLetsNoneGo(t *testing.T) {
	l, ts := downLine(New(0, 0), 10)
	var id uint64
	l.recover(at(0), 1)
	l.recover(at(ms(10)), 2) // a clean recovery: 4 in the first round
	l.Advance(at(ms(75)))
	assert.Equal(t, 4, released(ts), "the first round's four")
	l.Failure(at(ms(100)), &id) // at the second round's start
	sameTime(t, at(ms(200)), l.Advance(at(ms(199))), "the line moves next with the third round")
	assert.Equal(t, 4, released(ts), "none in the second round")
	l.Advance(at(ms(200)))
	assert.Equal(t, 5, released(ts), "a probe, 100 ms after the failure")
	l.End()
}

// A long outage is more than 5 s without a success: a success exactly
// 5 s after the run of failures started ramps as after a short one (two
// more for each retry's success, paid retries let go), one later gently
// (the round's one release alone).
func TestALongOutageIsMoreThanFiveSeconds(t *testing.T) {
	for _, c := range []struct {
		up   time.Duration
		want int
	}{{longOutage, 4}, {longOutage + 1, 1}} {
		l, ts := downLine(New(0, 0), 10)
		l.recover(at(c.up), 1)
		l.recover(at(c.up+ms(10)), 2)
		l.Advance(at(c.up + ms(99)))
		assert.Equal(t, c.want, released(ts), "back after %v", c.up)
		l.End()
	}
}

// After a long outage a round lets go no more than half the first
// attempts that succeeded in the round before (at least 1), however many
// retries succeeded in it.
func TestAfterALongOutageTheRampFollowsTheClientsFirstAttempts(t *testing.T) {
	l, ts := downLine(New(0, 0), 20)
	up := longOutage + time.Second
	l.recover(at(up), 1)
	assert.Equal(t, 1, released(ts), "the gentle ramp starts with one")
	for range 2 {
		l.recover(at(up+ms(10)), 2) // two retries succeed: twice 2 would be 4
	}
	for range 4 {
		l.recover(at(up+ms(20)), 1) // four first attempts succeed: half is 2
	}
	l.Advance(at(up + ms(99)))
	assert.Equal(t, 1, released(ts), "one in the first round")
	sameTime(t, at(up+ms(150)), l.Advance(at(up+ms(100))), "two in the second: the next half a round on")
	l.Advance(at(up + ms(199)))
	assert.Equal(t, 3, released(ts), "two in the second round")
	l.End()
}

// The first Wait's source of jitter stretches the probes' silences, each
// drawn anew, and a later Wait's source replaces it not: here 100 ms x 1.5
// for each probe.
func TestTheFirstWaitsJitterStretchesTheProbes(t *testing.T) {
	v := clock.NewVirtual(t0)
	l := New(0, 0).Start("h")
	var ended [2]time.Time
	var ok [2]bool
	for i, u := range []float64{0.5, 0.9} {
		v.At(t0.Add(time.Duration(i)*ms(20)), func() {
			ok[i] = l.Wait(v, func() float64 { return u }, context.Background(), t0.Add(time.Minute), 0)
			ended[i] = v.Now()
		})
	}
	v.Run()
	assert.Equal(t, [2]bool{true, true}, ok)
	sameTime(t, t0.Add(ms(150)), ended[0], "the first probe")
	sameTime(t, t0.Add(ms(300)), ended[1], "the second, 150 ms after the first")
	l.End()
}
