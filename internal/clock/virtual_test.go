package clock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestVirtualRunsSleepersInTimeOrder(t *testing.T) {
	v := NewVirtual(t0)
	var log []string
	note := func(s string) { log = append(log, s+"@"+v.Now().Sub(t0).String()) }
	v.Go(func() {
		note("a")
		assert.Equal(t, WokeTime, v.Sleep(context.Background(), t0.Add(ms(30)), nil))
		note("a")
	})
	v.Go(func() {
		note("b")
		v.Sleep(context.Background(), t0.Add(ms(10)), nil)
		note("b")
		v.Sleep(context.Background(), t0.Add(ms(30)), nil) // same instant as a's: scheduled later, runs later
		note("b")
	})
	end := v.Run()
	assert.Equal(t, []string{"a@0s", "b@0s", "b@10ms", "a@30ms", "b@30ms"}, log)
	assert.Equal(t, t0.Add(ms(30)), end)
}

func TestVirtualSignalWakesItsSleeper(t *testing.T) {
	v := NewVirtual(t0)
	ch := v.Signal()
	fire := func() { v.Fire(ch) }
	var woke Woke
	var at time.Time
	v.Go(func() {
		woke = v.Sleep(context.Background(), t0.Add(time.Hour), ch)
		at = v.Now()
	})
	tm := v.AfterFunc(ms(5), fire)
	v.Run()
	assert.Equal(t, WokeSignal, woke)
	assert.Equal(t, t0.Add(ms(5)), at)
	assert.False(t, tm.Stop(), "the timer fired")

	// A signal fired before the Sleep: at once.
	ch = v.Signal()
	v.Fire(ch)
	v.Go(func() { woke = v.Sleep(context.Background(), v.Now().Add(time.Hour), ch) })
	v.Run()
	assert.Equal(t, WokeSignal, woke)
}

// Fires that come before a Sleep wakes wake it once; a fire that comes as
// the Sleep's time does is left for the next Sleep, not lost.
func TestVirtualFiresBeforeAWakeWakeItOnce(t *testing.T) {
	v := NewVirtual(t0)
	ch := v.Signal()
	var woke []Woke
	var at []time.Duration
	sleep := func(t time.Time) {
		woke = append(woke, v.Sleep(context.Background(), t, ch))
		at = append(at, v.Now().Sub(t0))
	}
	v.Go(func() {
		sleep(v.Now().Add(time.Hour)) // fired twice at 5 ms
		sleep(v.Now().Add(time.Second))
		v.Fire(ch)
		v.Fire(ch)
		sleep(v.Now().Add(time.Hour))
		sleep(v.Now().Add(ms(10)))
		sleep(v.Now().Add(ms(10))) // fired as its time comes
		sleep(v.Now().Add(time.Hour))
	})
	v.AfterFunc(ms(5), func() { v.Fire(ch); v.Fire(ch) })
	v.AfterFunc(ms(1025), func() { v.Fire(ch) })
	v.Run()
	assert.Equal(t, []Woke{WokeSignal, WokeTime, WokeSignal, WokeTime, WokeTime, WokeSignal}, woke)
	assert.Equal(t, []time.Duration{ms(5), ms(1005), ms(1005), ms(1015), ms(1025), ms(1025)}, at)
}

func TestVirtualTimerStopAndReset(t *testing.T) {
	v := NewVirtual(t0)
	var fired []time.Duration
	tm := v.AfterFunc(ms(10), func() { fired = append(fired, v.Now().Sub(t0)) })
	stopped := v.AfterFunc(ms(5), func() { t.Error("a stopped timer fired") })
	require.True(t, stopped.Stop())
	assert.False(t, stopped.Stop())
	assert.True(t, tm.Reset(ms(20)), "reset while pending")
	v.Run()
	assert.Equal(t, []time.Duration{ms(20)}, fired)
	assert.False(t, tm.Reset(ms(1)), "reset after firing")
	v.Run()
	assert.Equal(t, []time.Duration{ms(20), ms(21)}, fired)
}

func TestVirtualDeadline(t *testing.T) {
	v := NewVirtual(t0)
	ctx, cancel := v.WithDeadline(context.Background(), t0.Add(ms(50)))
	defer cancel()
	var woke Woke
	var err error
	v.Go(func() {
		woke = v.Sleep(ctx, t0.Add(time.Second), nil)
		err = ctx.Err()
	})
	end := v.Run()
	assert.Equal(t, WokeContext, woke)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	dl, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, t0.Add(ms(50)), dl)
	assert.Equal(t, t0.Add(time.Second), end, "the sleeper's own event still runs, void")

	ctx2, cancel2 := v.WithDeadline(context.Background(), v.Now().Add(time.Hour))
	cancel2()
	assert.ErrorIs(t, ctx2.Err(), context.Canceled)
	v.Run()
}

// On the virtual clock too, a Sleep given the zero time ends only by its
// signal or its context's deadline.
func TestVirtualSleepWithoutATime(t *testing.T) {
	v := NewVirtual(t0)
	ch := v.Signal()
	var woke [2]Woke
	var at [2]time.Time
	v.Go(func() { woke[0] = v.Sleep(context.Background(), time.Time{}, ch); at[0] = v.Now() })
	ctx, cancel := v.WithDeadline(context.Background(), t0.Add(ms(70)))
	defer cancel()
	v.Go(func() { woke[1] = v.Sleep(ctx, time.Time{}, v.Signal()); at[1] = v.Now() })
	v.AfterFunc(ms(40), func() { v.Fire(ch) })
	v.Run()
	assert.Equal(t, [2]Woke{WokeSignal, WokeContext}, woke)
	assert.Equal(t, [2]time.Time{t0.Add(ms(40)), t0.Add(ms(70))}, at)
}

func TestMonoRoundTrips(t *testing.T) {
	now := time.Now()
	assert.Equal(t, Mono(now), Mono(FromMono(Mono(now))))
	assert.Greater(t, Mono(t0), int64(0), "a time before the process started is still positive")
	assert.LessOrEqual(t, Mono(now), MonoNow())
}

func TestVirtualCountsTimersOfOneInstantAsTies(t *testing.T) {
	v := NewVirtual(t0)
	ch := v.Signal()
	fire := func() { v.Fire(ch) }
	v.At(t0, func() { v.Sleep(context.Background(), t0.Add(ms(10)), nil) })
	v.At(t0.Add(ms(1)), func() {
		v.Sleep(context.Background(), t0.Add(ms(20)), nil)
		fire() // wakes the third at 20 ms: caused, not a tie
	})
	v.At(t0.Add(ms(2)), func() { v.Sleep(context.Background(), t0.Add(time.Hour), ch) })
	v.Run()
	assert.Zero(t, v.Ties())

	v.Go(func() { v.Sleep(context.Background(), v.Now().Add(ms(5)), nil) })
	v.AfterFunc(ms(5), func() {})
	v.Run()
	assert.Equal(t, 1, v.Ties(), "a sleep and a timer ending at one instant")
}

func TestVirtualCountsGoroutinesStartedTogetherAsATie(t *testing.T) {
	v := NewVirtual(t0)
	v.Go(func() {})
	v.Go(func() {})
	v.Run()
	assert.Equal(t, 1, v.Ties())
}
