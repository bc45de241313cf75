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

// Tickets with an until leave the line at exactly that instant unless a
// release or a cancellation came first; each is let know once, and the
// heap of expiries stays in order through removals from its middle.
func TestTicketsExpireAtTheirUntil(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	b := New(0, 0) // no credit: only probes release, one a silence
	type rec struct {
		until    time.Time
		fired    []time.Time
		expired  bool
		canceled bool
	}
	recs := make([]*rec, 500)
	tickets := make([]*Ticket, len(recs))
	var now time.Time
	for i := range recs {
		r := &rec{until: at(time.Duration(1+rnd.IntN(3000)) * time.Millisecond)}
		recs[i] = r
		tk := &Ticket{until: clock.Mono(r.until)}
		tickets[i] = tk
		b.mu.Lock()
		if b.releases == nil {
			b.releases = make(map[*Ticket]func())
		}
		b.releases[tk] = func() { r.fired = append(r.fired, now); r.expired = tk.expired }
		b.enqueueLocked("h", at(0), tk)
		b.mu.Unlock()
	}
	for i := range recs {
		if i%3 == 0 { // a third canceled at once, from every part of the heap
			recs[i].canceled = tickets[i].Cancel()
			require.True(t, recs[i].canceled)
		}
	}
	checkHeap(t, b)
	for now = at(0); ; {
		next := b.Advance(now)
		checkHeap(t, b)
		if next.IsZero() {
			break
		}
		require.True(t, next.After(now), "Advance moves on")
		now = next
	}
	released, expired := 0, 0
	for i, r := range recs {
		if r.canceled {
			assert.Empty(t, r.fired, "ticket %d was canceled", i)
			continue
		}
		require.Len(t, r.fired, 1, "ticket %d is let know once", i)
		if r.expired {
			expired++
			sameTime(t, r.until, r.fired[0], "ticket %d leaves at its until", i)
		} else {
			released++
			assert.True(t, r.fired[0].Before(r.until), "ticket %d released before its until", i)
		}
	}
	assert.Positive(t, released, "probes released some")
	assert.Positive(t, expired)
	assert.Zero(t, b.waiting.Load())
	assert.Empty(t, b.lanes["h"].line)
	assert.Empty(t, b.releases, "each release called and forgotten")
}

// checkHeap checks that b.exp is a heap whose tickets know their index.
func checkHeap(t *testing.T, b *Budget) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, tk := range b.exp {
		require.EqualValues(t, i+1, tk.at)
		require.False(t, tk.done)
		if i > 0 {
			require.LessOrEqual(t, b.exp[(i-1)/2].until, tk.until)
		}
	}
}

// timerCount is the real clock, counting the timers made and the Sleeps
// given a time.
type timerCount struct {
	clock.Real
	timers, timed atomic.Int32
}

func (c *timerCount) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.timers.Add(1)
	return c.Real.AfterFunc(d, f)
}

func (c *timerCount) Sleep(ctx context.Context, t time.Time, ch <-chan struct{}) clock.Woke {
	if !t.IsZero() {
		c.timed.Add(1)
	}
	return c.Real.Sleep(ctx, t, ch)
}

// Retries waiting in line hold no timer of their own: the budget's one
// timer lets them go, or out at their until, however many wait.
func TestWaitingRetriesShareTheBudgetsTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := new(timerCount)
		b := New(0, 0)
		start := time.Now()
		var wg sync.WaitGroup
		var went, out atomic.Int32
		for i := range 1000 {
			wg.Go(func() {
				until := start.Add(time.Second + time.Duration(i)*time.Millisecond)
				if b.Wait(clk, nil, "h", context.Background(), until, false) {
					went.Add(1)
					return
				}
				out.Add(1)
				assert.Equal(t, until, time.Now(), "out of line at its until")
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, clk.timers.Load(), "one timer, the budget's")
		assert.Zero(t, clk.timed.Load(), "no Sleep with a time of its own")
		assert.EqualValues(t, 1000, went.Load()+out.Load())
		assert.Positive(t, out.Load())
	})
}
