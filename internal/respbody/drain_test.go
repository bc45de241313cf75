package respbody

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// watchedBody is a failed answer's body for the drains' tests: it
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

// Each stalled drain is cut off exactly at its own cut-off, on its own
// timer: 60 drains, begun a millisecond apart, with limits of 50 ms, 80 ms,
// 300 ms and 1 s, a third of them ending by themselves before their
// cut-off (those are not cut: the drain closes them when they end). Every
// body is closed once.
func TestEachDrainIsCutOffAtItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
			wg.Go(func() { Drain(context.Background(), resp, limit, clock.Real{}) })
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
	})
}

// One Transport used by bubble after bubble (a package's client shared by
// tests), and by two bubbles at once, and outside any: each stalled drain
// is cut off at its own limit by its own clock.
func TestDrainsInBubblesAreCutOffByTheirOwn(t *testing.T) {
	drain := func(t *testing.T, ends, limit, want time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			b := newWatchedBody(ends)
			Drain(context.Background(), &http.Response{StatusCode: 503, ContentLength: 100, Body: b}, limit, clock.Real{})
			assert.Equal(t, want, b.at.Sub(b.start), "closed")
			assert.EqualValues(t, 1, b.closes.Load(), "closed once")
		})
	}
	t.Run("one after another", func(t *testing.T) {
		drain(t, time.Millisecond, MinTime, time.Millisecond) // ends by itself
		drain(t, 0, time.Second, time.Second)                 // stalls: cut off at its limit
	})
	t.Run("two at once", func(t *testing.T) {
		t.Run("long", func(t *testing.T) { t.Parallel(); drain(t, 0, time.Second, time.Second) })
		t.Run("short", func(t *testing.T) { t.Parallel(); drain(t, 0, MinTime, MinTime) })
	})
	b := newWatchedBody(0)
	Drain(context.Background(), &http.Response{StatusCode: 503, ContentLength: 100, Body: b}, MinTime, clock.Real{})
	assert.EqualValues(t, 1, b.closes.Load(), "outside any bubble too")
}

// countedBody is a response body that counts its closes.
type countedBody struct {
	bytes.Reader
	closes int
}

func (b *countedBody) Close() error { b.closes++; return nil }

// Draining a failed attempt's body costs three allocations: its cutter,
// the cutter's timer and the timer's function. Each body is read to its
// end and closed once. (Not counted under the race detector.)
func TestDrainingAFailedBodyAllocatesItsCutter(t *testing.T) {
	payload := []byte(`{"error":{"type":"overloaded","message":"try again in a moment"}}`)
	body := &countedBody{}
	resp := &http.Response{StatusCode: 503, ContentLength: int64(len(payload))}
	drain := func() {
		body.Reset(payload)
		resp.Body = body
		Drain(context.Background(), resp, time.Minute, clock.Real{})
	}
	allocs := testing.AllocsPerRun(100, drain)
	if !testutil.RaceEnabled {
		assert.LessOrEqual(t, allocs, 3.0, "allocations per drain")
	}
	assert.Zero(t, body.Len(), "the body was read to its end")
	assert.Equal(t, 101, body.closes, "each body closed once")
}

// Drain reads a body of up to Limit bytes to its end, so that its
// connection can be reused, and closes one known empty or longer than
// Limit without reading it; each is closed once.
func TestDrainReadsUpToLimitAndClosesLongerAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		cl   int64
		read int
	}{
		{"known length at Limit", Limit, Limit, Limit},
		{"known length over Limit", Limit + 1, Limit + 1, 0},
		{"unknown length", 100, -1, 100},
		{"unknown length over Limit: Limit bytes read", 2 * Limit, -1, Limit},
		{"empty by its length", 10, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: bytes.NewReader(make([]byte, tc.size))}
			body := testutil.NewCloseRecorder(cr)
			Drain(context.Background(), &http.Response{StatusCode: 503, ContentLength: tc.cl, Body: body}, time.Minute, clock.Real{})
			assert.Equal(t, tc.read, cr.n, "bytes read")
			assert.Equal(t, 1, body.Closes())
		})
	}
}

// How long a drain may take is the retry's delay, within [MinTime,
// MaxTime].
func TestTimeIsTheDelayWithinBounds(t *testing.T) {
	for _, tc := range []struct{ delay, want time.Duration }{
		{0, MinTime},
		{MinTime - 1, MinTime},
		{MinTime, MinTime},
		{200 * time.Millisecond, 200 * time.Millisecond},
		{MaxTime, MaxTime},
		{MaxTime + 1, MaxTime},
		{time.Hour, MaxTime},
	} {
		assert.Equal(t, tc.want, Time(tc.delay), "delay %v", tc.delay)
	}
}

// A stalled body deaf to contexts is cut off when the caller's context
// ends before the drain's limit: the request's time is the caller's. The
// same holds for a body kept while its retry waits in line, which is then
// lost.
func TestADrainEndsWithTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, keep := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			b := newWatchedBody(0)
			resp := &http.Response{StatusCode: 503, ContentLength: 100, Body: b}
			if keep {
				assert.False(t, Keep(ctx, resp, time.Minute, clock.Real{}), "kept")
			} else {
				Drain(ctx, resp, time.Minute, clock.Real{})
			}
			assert.Equal(t, 10*time.Millisecond, b.at.Sub(b.start), "cut off at the cancel (keep %v)", keep)
			assert.Equal(t, 10*time.Millisecond, time.Since(b.start), "returned then (keep %v)", keep)
			synctest.Wait()
			assert.EqualValues(t, 1, b.closes.Load(), "closed once (keep %v)", keep)
		}
	})
}
