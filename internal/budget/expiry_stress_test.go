package budget

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A tick that comes late (Advance at 150 ms, the ticket's until at 80 ms,
// the lane's probe due at 100 ms) lets the ticket out expired, not go as
// the probe: expiries come first.
func TestALateTickDoesNotReleaseATicketPastItsUntil(t *testing.T) {
	b := New(0, 0)
	tk := &Ticket{until: clock.Mono(at(ms(80)))}
	var expired, fired bool
	b.mu.Lock()
	b.releases = map[*Ticket]func(){tk: func() { fired = true; expired = tk.expired }}
	b.enqueueLocked("h", at(0), tk)
	b.mu.Unlock()
	b.Advance(at(ms(150)))
	require.True(t, fired)
	assert.True(t, expired, "its until (80 ms) came before the probe (100 ms): it should leave unreleased")
}

// Many Waits on the real clock, their untils, their contexts' ends and the
// host's successes all within a few milliseconds: every Wait returns, and
// the budget is left with nobody in line, an empty heap and no release.
func TestReleaseExpireCancelStress(t *testing.T) {
	for round := range 20 {
		b := New(1, 2) // credit: successes pay for releases too (recoverLocked)
		clk := clock.Real{}
		rnd := rand.New(rand.NewPCG(uint64(round), 7))
		start := time.Now()
		var wg sync.WaitGroup
		var went, out atomic.Int32
		const n = 300
		for i := range n {
			until := start.Add(time.Duration(rnd.IntN(4000)) * time.Microsecond)
			cd := time.Duration(rnd.IntN(4000)) * time.Microsecond
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), cd)
				defer cancel()
				if b.Wait(clk, nil, "h", ctx, until, i%5 == 0) {
					went.Add(1)
				} else {
					out.Add(1)
				}
			})
		}
		stop := newsOf(b, "h")
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			stop()
			t.Fatalf("round %d: Waits stuck: %d of %d returned", round, went.Load()+out.Load(), n)
		}
		stop()
		b.mu.Lock()
		assert.Zero(t, b.waiting.Load())
		assert.Empty(t, b.exp)
		assert.Empty(t, b.lanes["h"].line)
		assert.Empty(t, b.releases)
		b.mu.Unlock()
	}
}

// Untils arriving in decreasing order (each earlier than the timer is set
// for), and the earliest canceled: each Wait leaves at exactly its until.
func TestEarlierUntilsRearmTheTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(0, 0)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				until := start.Add(time.Second - time.Duration(i)*10*time.Millisecond)
				ctx, cancel := context.WithCancel(context.Background())
				if i == 49 { // the earliest: canceled before its until
					time.AfterFunc(200*time.Millisecond, cancel)
				}
				defer cancel()
				ok := b.Wait(clock.Real{}, nil, "h", ctx, until, true) // last attempts: probes wait 2 s
				assert.False(t, ok)
				if i == 49 {
					assert.Equal(t, start.Add(49*time.Millisecond+200*time.Millisecond), time.Now())
				} else {
					assert.Equal(t, until, time.Now(), "wait %d out at its until", i)
				}
			})
		}
		wg.Wait()
	})
}

// On the virtual clock, a context canceled by other means than its deadline
// wakes no Sleep: the Wait still ends at its until (the budget's expiry).
func TestAVirtualWaitCanceledByOtherMeansStillEndsAtItsUntil(t *testing.T) {
	v := clock.NewVirtual(t0)
	b := New(0, 0)
	var ok = true
	var end time.Time
	ctx, cancel := context.WithCancel(context.Background())
	v.Go(func() {
		ok = b.Wait(v, nil, "h", ctx, t0.Add(ms(500)), true)
		end = v.Now()
	})
	v.At(t0.Add(ms(50)), cancel)
	v.Run()
	assert.False(t, ok)
	sameTime(t, t0.Add(ms(500)), end)
}

// newsOf reports a success and a failure of host to b, again and again (a
// first attempt's success every other time), until the function it
// returns is called; that returns once the reports have stopped.
func newsOf(b *Budget, host string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for a := 1; ; a++ {
			select {
			case <-done:
				return
			default:
			}
			b.Succeeded(clock.Real{}, host, 1+a%2)
			b.Failure(host, time.Now())
		}
	})
	return func() { close(done); wg.Wait() }
}

// sigRec is the clock it wraps, remembering the channel of its one Wait.
type sigRec struct {
	clock.Clock
	ch chan struct{}
}

func (s *sigRec) Signal() chan struct{} { s.ch = make(chan struct{}); return s.ch }

// fireCount is the real clock, counting how often each signal is fired.
type fireCount struct {
	clock.Real
	mu    sync.Mutex
	fired map[chan struct{}]int
}

func (c *fireCount) Fire(ch chan struct{}) {
	c.mu.Lock()
	c.fired[ch]++
	c.mu.Unlock()
	c.Real.Fire(ch)
}

// Each ticket is let go at most once, and a Wait that returns true was let
// go: released, expired and canceled all within a few milliseconds.
func TestAWaitIsLetGoAtMostOnce(t *testing.T) {
	for round := range 30 {
		clk := &fireCount{fired: map[chan struct{}]int{}}
		b := New(1, 2)
		rnd := rand.New(rand.NewPCG(uint64(round), 9))
		start := time.Now()
		var wg sync.WaitGroup
		const n = 300
		chans := make([]chan struct{}, n)
		oks := make([]bool, n)
		for i := range n {
			until := start.Add(time.Duration(rnd.IntN(3000)) * time.Microsecond)
			cd := time.Duration(rnd.IntN(3000)) * time.Microsecond
			rec := &sigRec{Clock: clk}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), cd)
				defer cancel()
				oks[i] = b.Wait(rec, nil, "h", ctx, until, i%5 == 0)
				chans[i] = rec.ch
			})
		}
		stop := newsOf(b, "h")
		wg.Wait()
		stop()
		clk.mu.Lock()
		for i, ch := range chans {
			if ch == nil {
				continue // it returned before it was in line
			}
			require.LessOrEqual(t, clk.fired[ch], 1, "round %d wait %d fired twice", round, i)
			if oks[i] {
				require.Equal(t, 1, clk.fired[ch], "round %d wait %d went without being let go", round, i)
			}
		}
		clk.mu.Unlock()
		assert.Zero(t, b.waiting.Load())
	}
}
