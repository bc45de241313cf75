package budget

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// budget's timer and its waits must end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// sameTime asserts that got is the instant want.
func sameTime(t *testing.T, want, got time.Time, msg ...any) {
	t.Helper()
	assert.True(t, want.Equal(got), append([]any{"want %v, got %v", want, got}, msg...)...)
}

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// spend asks b for retries at now until it refuses one (or limit were
// granted) and returns how many it granted.
func spend(b *Budget, now time.Time, limit int) int {
	n := 0
	for n < limit && b.Retry("", now) {
		n++
	}
	return n
}

// line enqueues n tickets at now and returns a counter of their releases
// and the tickets.
func line(b *Budget, now time.Time, n int) (*atomic.Int32, []*Ticket) {
	var released atomic.Int32
	tickets := make([]*Ticket, n)
	for i := range tickets {
		tickets[i] = b.Enqueue("", now, func() { released.Add(1) })
	}
	return &released, tickets
}

func TestCreditIsEarnedBySuccesses(t *testing.T) {
	b := New(0.2, 10)
	assert.Equal(t, 10, spend(b, at(0), 100), "a new budget holds its whole credit")
	for range 4 {
		b.Success("", at(0), 1)
	}
	assert.Equal(t, 0, spend(b, at(time.Hour), 100), "4 successes earn 0.8 of a retry; time earns nothing")
	b.Success("", at(0), 1)
	assert.Equal(t, 1, spend(b, at(0), 100), "the fifth earns the whole retry")
	for range 1000 {
		b.Success("", at(0), 1)
	}
	assert.Equal(t, 10, spend(b, at(0), 100), "credit never exceeds the budget's size")
}

func TestFailuresCostNothingButRetries(t *testing.T) {
	b := New(0.2, 3)
	for range 1000 {
		b.Failure("down.test", at(0))
	}
	assert.Equal(t, 3, spend(b, at(0), 100), "failures alone spend no credit")
}

// A failure of a host makes it down: its retries wait in line though
// credit is left, until a success of the host. Other hosts' retries are
// paid as before.
func TestAHostDownHoldsItsRetries(t *testing.T) {
	b := New(0.2, 10)
	require.True(t, b.Retry("h.test", at(0)), "no failure yet")
	b.Failure("h.test", at(0))
	assert.False(t, b.Retry("h.test", at(0)), "down")
	assert.True(t, b.Retry("other.test", at(0)), "another host's retries are paid")
	b.Success("H.test", at(time.Millisecond), 1) // host names compare in lower case
	assert.True(t, b.Retry("h.test", at(time.Millisecond)), "seen back")
}

func TestRefusesWhileRetriesWait(t *testing.T) {
	b := New(0.2, 1)
	require.True(t, b.Retry("", at(0)))
	released, tickets := line(b, at(0), 1)
	for range 5 {
		b.Refund() // credit, yet a ticket waits: first come, first served
	}
	assert.False(t, b.Retry("", at(0)))
	assert.True(t, tickets[0].Cancel())
	assert.Zero(t, released.Load())
	assert.True(t, b.Retry("", at(0)), "the line is empty again")
}

// With nothing reported, a retry in line goes as a probe after 100 ms of
// silence, and each probe doubles the silence the next needs, up to 5 s,
// as a backoff would; any outcome reported pushes the next probe back.
func TestProbesAtBackoffPace(t *testing.T) {
	b := New(0, 0)
	b.Failure("", at(0))
	released, _ := line(b, at(0), 10)
	sameTime(t, at(ms(100)), b.Advance(at(0)))
	b.Advance(at(ms(99)))
	assert.EqualValues(t, 0, released.Load())
	sameTime(t, at(ms(300)), b.Advance(at(ms(100))))
	assert.EqualValues(t, 1, released.Load(), "the first probe")
	b.Failure("", at(ms(150))) // the probe failed: news
	b.Advance(at(ms(300)))
	assert.EqualValues(t, 1, released.Load(), "the failure pushed the next probe back")
	sameTime(t, at(ms(350)), b.Advance(at(ms(349))))
	next := b.Advance(at(ms(350)))
	assert.EqualValues(t, 2, released.Load(), "the second probe, 200 ms after the news")
	for i, gap := range []int{400, 800, 1600, 3200, 5000, 5000} {
		want := next
		assert.Equal(t, ms(gap), want.Sub(lastNews(b, "")), "gap %d", i)
		next = b.Advance(want)
		assert.EqualValues(t, 3+i, released.Load(), "probe %d", 3+i)
	}
	b.Success("", at(time.Minute), 1) // news, and a recovery
	assert.Equal(t, time.Duration(0), b.lanes[""].probe, "a success resets the pace")
}

// lastNews returns when b last heard of host (or let a probe go to it).
func lastNews(b *Budget, host string) time.Time { return clock.FromMono(b.lanes[host].active) }

// The probe is the first retry in line that is not its request's last
// attempt; a last attempt probes only after 2 s of silence.
func TestALastAttemptProbesLast(t *testing.T) {
	b := New(0, 0)
	var last, other atomic.Int32
	b.Enqueue("", at(0), func() { last.Add(1) }).last = true // (not released before the next Advance)
	b.Enqueue("", at(0), func() { other.Add(1) })
	sameTime(t, at(ms(2100)), b.Advance(at(ms(100))), "a last attempt waits 2 s of silence")
	assert.EqualValues(t, 1, other.Load(), "the retry with attempts to spare probes")
	assert.Zero(t, last.Load())
	b.Failure("", at(ms(1000))) // news from elsewhere
	sameTime(t, at(ms(3000)), b.Advance(at(ms(2100))))
	assert.Zero(t, last.Load())
	b.Advance(at(ms(3000)))
	assert.EqualValues(t, 1, last.Load(), "2 s without news: the last attempt probes")
}

// Each success of a host with retries in line lets one of them go if the
// credit pays for it, besides the recovery's ramp: the retries of a host
// failing part of its attempts go as their credit is earned.
func TestEachSuccessLetsAPaidRetryGo(t *testing.T) {
	b := New(0.5, 1)
	require.True(t, b.Retry("h", at(0)))
	var released atomic.Int32
	for range 10 {
		b.Enqueue("h", at(0), func() { released.Add(1) })
	}
	b.Success("h", at(time.Millisecond), 1) // half a retry earned: not yet paid
	assert.Zero(t, released.Load())
	b.Success("h", at(2*time.Millisecond), 1) // a whole retry: one goes
	assert.EqualValues(t, 1, released.Load())
	b.Success("h", at(3*time.Millisecond), 1)
	assert.EqualValues(t, 1, released.Load(), "the credit is spent again")
	b.Advance(at(3 * time.Millisecond))
	assert.EqualValues(t, 2, released.Load(), "the recovery's ramp goes on beside")
}

// After a host was silent of successes for a long outage, its successes
// pay no waiting retry: the gentle ramp alone lets the line go.
func TestAfterALongOutageOnlyTheRampLetsTheLineGo(t *testing.T) {
	b := New(1, 10)
	b.Failure("h", at(0))
	var released atomic.Int32
	for range 10 {
		b.Enqueue("h", at(0), func() { released.Add(1) })
	}
	for i := range 5 {
		b.Success("h", at(longOutage+time.Second+time.Duration(i)), 1)
	}
	assert.Zero(t, released.Load(), "no success paid a retry")
	b.Advance(at(longOutage + time.Second + 5))
	assert.EqualValues(t, 1, released.Load(), "the ramp starts with one")
}

// A success while retries wait starts a recovery: 2 releases in the first
// 100 ms round, then twice the successes of the round before while none
// fails, half of them once some do, and the recovery ends with a round
// that has no success. (A budget that earns no credit: the ramp alone.)
func TestRecoveryRamps(t *testing.T) {
	b := New(0, 0)
	b.Failure("", at(0))
	released, _ := line(b, at(0), 1000)
	ms := func(n int) time.Time { return at(time.Duration(n) * time.Millisecond) }

	b.Success("", ms(10), 1) // a first attempt's success: news, and a recovery
	next := b.Advance(ms(10))
	assert.EqualValues(t, 1, released.Load(), "the first release is due at once")
	sameTime(t, ms(60), next)
	b.Advance(ms(59))
	assert.EqualValues(t, 1, released.Load())
	b.Advance(ms(60))
	assert.EqualValues(t, 2, released.Load())
	b.Success("", ms(61), 2)
	b.Success("", ms(62), 2) // both released retries succeeded
	for range 50 {
		b.Success("", ms(63), 1) // the client's other traffic does not feed the ramp
	}
	sameTime(t, ms(110), b.Advance(ms(100)))

	// Round 2: 4 releases over [110, 210), one every 25 ms.
	b.Advance(ms(209))
	assert.EqualValues(t, 6, released.Load())
	for range 4 {
		b.Success("", ms(209), 2)
	}
	// Round 3: 8 releases; 4 attempts fail, 8 retries succeed.
	b.Advance(ms(309))
	assert.EqualValues(t, 14, released.Load())
	for range 8 {
		b.Success("", ms(309), 3)
	}
	for range 4 {
		b.Failure("", ms(309))
	}
	// Round 4: half the successes, 4 releases.
	b.Advance(ms(409))
	assert.EqualValues(t, 18, released.Load())
	// Round 5 follows a round without a retry's success: the recovery ends,
	// and the line waits for a probe, 100 ms after the last news (ms 309).
	b.Advance(ms(409))
	assert.EqualValues(t, 18, released.Load())
	sameTime(t, ms(610), b.Advance(ms(410)))
	assert.EqualValues(t, 19, released.Load(), "a probe")
}

func TestTicketCancel(t *testing.T) {
	b := New(0.2, 1)
	b.Failure("", at(0))
	released, tickets := line(b, at(0), 2)
	assert.True(t, tickets[0].Cancel(), "taken out of line")
	assert.False(t, tickets[0].Cancel(), "once")
	b.Advance(at(time.Second))
	assert.EqualValues(t, 1, released.Load(), "the other ticket was the probe")
	assert.False(t, tickets[1].Cancel(), "released: too late to cancel")
	assert.True(t, b.Advance(at(time.Hour)).IsZero(), "nothing waits")
}

// A nil Budget allows every retry at no cost, and releases a retry put in
// line at once.
func TestNilBudgetAllowsEveryRetry(t *testing.T) {
	var b *Budget
	b.Failure("", t0)
	b.Success("", t0, 1)
	b.Succeeded(clock.Real{}, "", 1)
	b.Refund()
	assert.Equal(t, 100_000, spend(b, t0, 100_000))
	released, tickets := line(b, t0, 1)
	assert.EqualValues(t, 1, released.Load(), "released at once")
	assert.False(t, tickets[0].Cancel())
	assert.True(t, b.Advance(t0).IsZero())
	assert.True(t, b.Wait(clock.Real{}, nil, "", context.Background(), t0, false))
}

// countingClock is the real clock, counting the reads of Now.
type countingClock struct {
	clock.Real
	reads atomic.Int32
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.Real.Now()
}

// Succeeded earns credit without reading the clock while no retry waits;
// with retries in line it reads the clock once and starts a recovery.
func TestSucceededReadsTheClockOnlyWhenRetriesWait(t *testing.T) {
	var clk countingClock
	b := New(0.2, 1)
	require.True(t, b.Retry("", t0))
	for range 5 {
		b.Succeeded(&clk, "", 1)
	}
	assert.Zero(t, clk.reads.Load(), "nothing waits: no clock read")
	assert.Equal(t, 1, spend(b, t0, 100), "five successes earned the retry back")
	now := time.Now()
	released, _ := line(b, now, 1)
	b.Succeeded(&clk, "", 1)
	assert.EqualValues(t, 1, clk.reads.Load())
	b.Advance(time.Now())
	assert.EqualValues(t, 1, released.Load(), "the success started a recovery")
}

// Goroutines racing for the last retries of credit never get more than
// there is, and the budget's count agrees with them.
func TestConcurrentRetriesNeverExceedTheCredit(t *testing.T) {
	for round := range 300 {
		b := New(0, 10)
		var granted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Go(func() {
				<-start
				for range 3 {
					if b.Retry("", t0) {
						granted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 10, granted.Load(), "round %d", round)
		require.Zero(t, spend(b, t0, 100), "round %d", round)
	}
}

// wallStepped returns at with its wall clock moved by d (whole seconds) and
// its monotonic reading kept: what time.Now returns after the system clock
// is stepped by d. It relies on the layout of time.Time (a wall word whose
// bits 30..62 count seconds when the top bit marks a monotonic reading) and
// checks the result, so a change of that layout fails the test loudly.
func wallStepped(t *testing.T, at time.Time, d time.Duration) time.Time {
	t.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	require.Zero(t, d%time.Second)
	stepped := at
	l := (*layout)(unsafe.Pointer(&stepped))
	require.NotZero(t, l.wall&(1<<63), "a monotonic reading")
	l.wall = uint64(int64(l.wall) + int64(d/time.Second)<<30)
	require.Equal(t, at.UnixNano()+int64(d), stepped.UnixNano(), "the wall clock moved by d")
	require.Zero(t, stepped.Sub(at), "the monotonic reading kept")
	return stepped
}

// A step of the wall clock neither lets a probe go early nor holds it: the
// budget counts time on the monotonic clock.
func TestIgnoresWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run("step "+step.String(), func(t *testing.T) {
			b := New(0.2, 1)
			now := time.Now()
			b.Failure("", now)
			released, _ := line(b, now, 1)
			b.Advance(wallStepped(t, now.Add(50*time.Millisecond), step))
			assert.Zero(t, released.Load(), "50 ms by the monotonic clock: no probe yet")
			b.Advance(wallStepped(t, now.Add(100*time.Millisecond), step))
			assert.EqualValues(t, 1, released.Load(), "100 ms by the monotonic clock: the probe")
		})
	}
}

// Each host has a line of its own: retries to a host whose line is long
// are refused while another host's retries are paid for, and a host's
// successes let only its own line go.
func TestEachHostHasItsOwnLine(t *testing.T) {
	b := New(0, 1) // one retry of credit, none earned
	now := at(0)
	require.True(t, b.Retry("down.test", now), "the credit pays for one retry")
	assert.False(t, b.Retry("down.test", now), "spent")
	var down, up atomic.Int32
	b.Enqueue("down.test", now, func() { down.Add(1) })
	b.Enqueue("DOWN.test", now, func() { down.Add(1) }) // host names compare in lower case
	b.Enqueue("up.test", now, func() { up.Add(1) })

	b.Success("up.test", at(10*time.Millisecond), 1)
	b.Advance(at(10 * time.Millisecond))
	assert.Equal(t, int32(1), up.Load(), "up.test's success lets its own retry go")
	assert.Zero(t, down.Load(), "and not down.test's")

	b.Failure("down.test", at(50*time.Millisecond)) // news of down.test: no probe yet
	b.Advance(at(120 * time.Millisecond))
	assert.Zero(t, down.Load(), "down.test was heard of 70 ms ago")
	b.Advance(at(150 * time.Millisecond))
	assert.Equal(t, int32(1), down.Load(), "100 ms without news of down.test: a probe")
}

// With a source of jitter, each probe's silence is stretched by a draw in
// [1, 2), drawn anew with each probe: clients whose lines formed together
// do not probe in lockstep.
func TestProbesAreJittered(t *testing.T) {
	v := clock.NewVirtual(t0)
	draws := []float64{0.5, 0.25}
	rnd := func() float64 { d := draws[0]; draws = append(draws[1:], d); return d }
	b := New(0, 0)
	var ended []time.Duration
	for range 2 {
		v.Go(func() {
			b.Wait(v, rnd, "h", context.Background(), t0.Add(time.Second), false)
			ended = append(ended, v.Now().Sub(t0))
		})
	}
	v.Run()
	// The line formed at 0 with a stretch of 1.5: the first probe at 150 ms;
	// the next, 200 ms of pace stretched by 1.25, 250 ms after it.
	assert.Equal(t, []time.Duration{ms(150), ms(400)}, ended)
}
