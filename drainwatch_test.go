package retryhttp

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchedBody is a failed answer's body for the drain watch's tests: it
// sends a few bytes, then either ends after ends (if not zero) or stalls
// until closed. It records when it was closed, and how often.
type watchedBody struct {
	ends   time.Duration
	start  time.Time
	sent   bool
	closed chan struct{}
	once   sync.Once
	closes atomic.Int32
	at     time.Time // when Close was first called
}

func newWatchedBody(ends time.Duration) *watchedBody {
	return &watchedBody{ends: ends, start: time.Now(), closed: make(chan struct{})}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "partial"), nil
	}
	if b.ends > 0 {
		select {
		case <-time.After(b.ends - time.Since(b.start)):
			return 0, errEnd
		case <-b.closed:
		}
	}
	<-b.closed
	return 0, errors.New("read on a closed body")
}

var errEnd = errors.New("the body's end") // (io.EOF is not needed: the drain stops on any error)

func (b *watchedBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() {
		b.at = time.Now()
		close(b.closed)
	})
	return nil
}

// The drains of a Transport share its watch's one timer, and each stalled
// drain is still cut off exactly at its own cut-off: 60 drains, begun a
// millisecond apart, with limits of 50 ms, 80 ms, 300 ms and 1 s, a third
// of them ending by themselves before their cut-off (those are not cut:
// the drain closes them when they end). Every body is closed once, no
// drain is left on the watch, and the watch's timer goes off once the
// last cut-off has passed. (The Transport runs on a clock of the test's,
// the real one in a bubble, so that its drains go on the watch: a real
// clock's drains in a bubble have timers of their own.)
func TestDrainWatchCutsEachDrainAtItsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{}
		tr := &Transport{Base: clockedBase{clk: clk}}
		tr.init()
		limits := []time.Duration{50 * time.Millisecond, 80 * time.Millisecond, 300 * time.Millisecond, time.Second}
		const n = 60
		bodies := make([]*watchedBody, n)
		var wg sync.WaitGroup
		for i := range n {
			limit := limits[i%len(limits)]
			var ends time.Duration
			if i%3 == 0 {
				ends = limit / 2
			}
			bodies[i] = newWatchedBody(ends)
			resp := &http.Response{StatusCode: 503, ContentLength: 100, Body: bodies[i]}
			wg.Go(func() { tr.drainClose(resp, limit) })
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		for i, b := range bodies {
			limit := limits[i%len(limits)]
			want := limit
			if b.ends > 0 {
				want = b.ends
			}
			assert.Equal(t, want, b.at.Sub(b.start), "body %d (limit %v, ends %v) closed", i, limit, b.ends)
			assert.EqualValues(t, 1, b.closes.Load(), "body %d closed once", i)
		}
		assert.EqualValues(t, 1, clk.made.Load(), "timers made")
		w := &tr.drains
		w.mu.Lock()
		assert.Empty(t, w.q, "drains left on the watch")
		assert.False(t, w.armed, "the watch's timer is off after the last cut-off")
		w.mu.Unlock()
	})
}

// countingClock counts the timers a Transport makes and resets.
type countingClock struct {
	clock.Real
	made, resets atomic.Int32
}

func (c *countingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.made.Add(1)
	return &countedTimer{c: c, Timer: time.AfterFunc(d, f)}
}

type countedTimer struct {
	c *countingClock
	*time.Timer
}

func (t *countedTimer) Reset(d time.Duration) bool {
	t.c.resets.Add(1)
	return t.Timer.Reset(d)
}

// The timer is not set for each drain: 1,000 drains of bodies that end at
// once, one every millisecond, with a cut-off of 50 ms, arm it about once
// per cut-off period (each time it fired with nothing due and went off),
// 20 times in the second they take, one timer made.
func TestDrainWatchSetsItsTimerOncePerCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{}
		tr := &Transport{Base: clockedBase{clk: clk}}
		tr.init()
		for range 1000 {
			b := newWatchedBody(time.Nanosecond)
			tr.drainClose(&http.Response{StatusCode: 503, ContentLength: 100, Body: b}, drainMinTime)
			require.EqualValues(t, 1, b.closes.Load())
			time.Sleep(time.Millisecond)
		}
		assert.EqualValues(t, 1, clk.made.Load(), "timers made")
		assert.InDelta(t, 19, clk.resets.Load(), 1, "timer resets for 1,000 drains over 1 s")
		time.Sleep(drainMinTime)
		w := &tr.drains
		w.mu.Lock()
		defer w.mu.Unlock()
		assert.Empty(t, w.q)
		assert.False(t, w.armed, "the timer went off")
	})
}

// A retry that nothing times (no deadline, UnlimitedBudget, no server's
// wait, no backoff) reads no clock but its drain's, of the monotonic clock
// alone, which still tells a testing/synctest bubble: in a bubble the drain
// of its failed answer has a timer of its own, and outside it goes on the
// Transport's watch, whose timer is never touched in a bubble.
func TestAnUntimedRetrysDrainKnowsItsWorld(t *testing.T) {
	base := &fakeBase{answer: func(n int, req *http.Request) (*http.Response, error) {
		if n%2 == 1 {
			return response(req, http.StatusServiceUnavailable, nil, "unavailable"), nil
		}
		return response(req, http.StatusOK, nil, "ok"), nil
	}}
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}, Budget: UnlimitedBudget()}
	get := func(t *testing.T) {
		resp, err := tr.RoundTrip(newGet(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "ok", readBody(t, resp))
	}
	watched := func() bool {
		w := &tr.drains
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.timer != nil
	}
	synctest.Test(t, get)
	assert.False(t, watched(), "the watch was not used in the bubble")
	get(t)
	assert.True(t, watched(), "the watch drained it outside")
	synctest.Test(t, get) // the watch's timer is not touched in a bubble
	assert.EqualValues(t, 3, tr.Stats().Retries)
}

// One Transport used by bubble after bubble (a package's client shared by
// tests), and by two bubbles at once: each bubble's stalled drain is cut
// off at its own limit by its own clock. (With one watch for the bubbles,
// the second bubble's drain waited on the first's timer, which never fired:
// a deadlock; and one bubble's timer closed the other's body: a fatal
// error.)
func TestDrainsInBubblesAreCutOffByTheirOwn(t *testing.T) {
	tr := &Transport{}
	tr.init()
	drain := func(t *testing.T, ends, limit, want time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			b := newWatchedBody(ends)
			tr.drainClose(&http.Response{StatusCode: 503, ContentLength: 100, Body: b}, limit)
			assert.Equal(t, want, b.at.Sub(b.start), "closed")
			assert.EqualValues(t, 1, b.closes.Load(), "closed once")
		})
	}
	t.Run("one after another", func(t *testing.T) {
		drain(t, time.Millisecond, drainMinTime, time.Millisecond) // ends by itself
		drain(t, 0, time.Second, time.Second)                      // stalls: cut off at its limit
	})
	t.Run("two at once", func(t *testing.T) {
		t.Run("long", func(t *testing.T) { t.Parallel(); drain(t, 0, time.Second, time.Second) })
		t.Run("short", func(t *testing.T) { t.Parallel(); drain(t, 0, drainMinTime, drainMinTime) })
	})
	w := &tr.drains
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Nil(t, w.timer, "the watch was not used in a bubble")
}
