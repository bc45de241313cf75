package retryhttp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// exponential waits min(Cap, Base*2^n), without jitter: the bound of the
// jittered strategies, for tests (zero bounds mean the defaults).
type exponential struct{ Base, Cap time.Duration }

func (e exponential) Delay(n int, _ time.Duration, _ float64) time.Duration {
	base, cap := bounds(e.Base, e.Cap)
	return expCapped(base, cap, n)
}

const ms = time.Millisecond

// TestBackoffFormulas checks each strategy against the formulas of the AWS
// article, one retry at a time, with chosen random samples.
func TestBackoffFormulas(t *testing.T) {
	cases := []struct {
		name string
		b    Backoff
		n    int
		prev time.Duration
		u    float64
		want time.Duration
	}{
		// Exponential: min(cap, base*2^n); u and prev play no part.
		{"exponential n=0", exponential{100 * ms, time.Second}, 0, 0, 0.9, 100 * ms},
		{"exponential n=3", exponential{100 * ms, time.Second}, 3, 5 * time.Hour, 0.1, 800 * ms},
		{"exponential capped", exponential{100 * ms, time.Second}, 4, 0, 0.5, time.Second},
		{"exponential zero bounds mean the defaults", exponential{}, 2, 0, 0.5, 400 * ms},
		{"exponential zero bounds capped at 10s", exponential{}, 20, 0, 0.5, 10 * time.Second},
		// Full jitter: U(0, min(cap, base*2^n)).
		{"full jitter u=0", FullJitter{100 * ms, time.Second}, 2, 0, 0, 0},
		{"full jitter u=0.25", FullJitter{100 * ms, time.Second}, 2, 0, 0.25, 100 * ms},
		{"full jitter capped", FullJitter{100 * ms, time.Second}, 9, 0, 0.5, 500 * ms},
		{"full jitter defaults", FullJitter{}, 0, 0, 0.5, 50 * ms},
		// Equal jitter: v/2 + U(0, v/2).
		{"equal jitter u=0", EqualJitter{100 * ms, time.Second}, 1, 0, 0, 100 * ms},
		{"equal jitter u=0.5", EqualJitter{100 * ms, time.Second}, 1, 0, 0.5, 150 * ms},
		{"equal jitter capped", EqualJitter{100 * ms, time.Second}, 30, 0, 0.5, 750 * ms},
		// Decorrelated jitter: min(cap, U(base, 3*prev)), prev = base at first.
		{"decorrelated first", DecorrelatedJitter{100 * ms, time.Second}, 0, 0, 0.5, 200 * ms},
		{"decorrelated from prev", DecorrelatedJitter{100 * ms, time.Second}, 7, 200 * ms, 0.5, 350 * ms},
		{"decorrelated u=0 is base", DecorrelatedJitter{100 * ms, time.Second}, 1, 900 * ms, 0, 100 * ms},
		{"decorrelated capped", DecorrelatedJitter{100 * ms, time.Second}, 1, 900 * ms, 0.9, time.Second},
		{"decorrelated prev below base", DecorrelatedJitter{100 * ms, time.Second}, 1, 10 * ms, 0.5, 100 * ms},
		// Constant.
		{"constant", Constant(250 * ms), 12, time.Hour, 0.7, 250 * ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.b.Delay(tc.n, tc.prev, tc.u))
		})
	}
}

// sequence returns a random source that yields us in turn, cycling.
func sequence(us ...float64) func() float64 {
	i := 0
	return func() float64 {
		u := us[i%len(us)]
		i++
		return u
	}
}

// TestBackoffDelaysThroughTransport runs a request against a base that always
// answers 503, in fake time, with a fixed random source, and checks the exact
// wait before each retry twice: as OnRetry reports it, and as the time that
// passed between attempts.
func TestBackoffDelaysThroughTransport(t *testing.T) {
	us := []float64{0.5, 0.25, 0.75, 0.5, 0.1}
	cases := []struct {
		name string
		b    Backoff
		want []time.Duration
	}{
		{"default is full jitter 100ms..10s", nil,
			// U(0, 100ms·2^n) with u = 0.5, 0.25, 0.75, 0.5, 0.1
			[]time.Duration{50 * ms, 50 * ms, 300 * ms, 400 * ms, 160 * ms}},
		{"exponential", exponential{100 * ms, time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second}},
		{"full jitter", FullJitter{100 * ms, time.Second},
			[]time.Duration{50 * ms, 50 * ms, 300 * ms, 400 * ms, 100 * ms}},
		{"equal jitter", EqualJitter{100 * ms, time.Second},
			// v/2 + u·v/2 with v = 100, 200, 400, 800, 1000 ms
			[]time.Duration{75 * ms, 125 * ms, 350 * ms, 600 * ms, 550 * ms}},
		{"decorrelated jitter", DecorrelatedJitter{100 * ms, time.Second},
			// base + u·(3·prev - base), prev starting at base, capped at 1s:
			// 100+.5·200=200; 100+.25·500=225; 100+.75·575=531.25;
			// 100+.5·1493.75=846.875; 100+.1·2440.625=344.0625
			[]time.Duration{200 * ms, 225 * ms, 531250 * time.Microsecond, 846875 * time.Microsecond, 344062500}},
		{"constant", Constant(250 * ms),
			[]time.Duration{250 * ms, 250 * ms, 250 * ms, 250 * ms, 250 * ms}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.Statuses(503)}
				var reported []time.Duration
				tr := &Transport{
					Base:    base,
					Policy:  Policy{MaxAttempts: len(tc.want) + 1, Backoff: tc.b},
					Budget:  UnlimitedBudget(),
					OnRetry: func(e *RetryEvent) { reported = append(reported, e.Delay) },
				}
				tr.rand = sequence(us...)
				start := time.Now()

				resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil))

				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode)
				assert.Equal(t, tc.want, reported, "delays reported by OnRetry")
				calls := base.Calls()
				require.Len(t, calls, len(tc.want)+1)
				var waited []time.Duration
				var total time.Duration
				for i := 1; i < len(calls); i++ {
					waited = append(waited, calls[i].Sub(calls[i-1]))
				}
				for _, d := range tc.want {
					total += d
				}
				assert.Equal(t, tc.want, waited, "fake time between attempts")
				assert.Equal(t, total, time.Since(start), "fake time of the whole request")
			})
		})
	}
}

// TestBackoffBounds draws 10,000 delays per strategy and retry number from a
// seeded source and checks every one lies within the strategy's bounds, and
// that the jittered ones spread over their range (their mean is near the
// middle), so a strategy that ignored its random sample would fail.
func TestBackoffBounds(t *testing.T) {
	const draws = 10000
	base, cap := 100*ms, 10*time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 12 {
		v := min(cap, base<<n)
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			var sumFull, sumEqual float64
			for range draws {
				u := rng.Float64()
				require.Equal(t, v, exponential{base, cap}.Delay(n, 0, u))

				d := FullJitter{base, cap}.Delay(n, 0, u)
				require.True(t, 0 <= d && d < v, "full jitter %v outside [0, %v)", d, v)
				sumFull += float64(d)

				d = EqualJitter{base, cap}.Delay(n, 0, u)
				require.True(t, v/2 <= d && d <= v, "equal jitter %v outside [%v, %v]", d, v/2, v)
				sumEqual += float64(d)

				require.Equal(t, 3*ms, Constant(3*ms).Delay(n, 0, u))
			}
			assert.InEpsilon(t, float64(v)/2, sumFull/draws, 0.03, "full jitter mean")
			assert.InEpsilon(t, float64(v)*3/4, sumEqual/draws, 0.03, "equal jitter mean")
		})
	}
	t.Run("decorrelated", func(t *testing.T) {
		d := DecorrelatedJitter{base, cap}
		prev := time.Duration(0)
		var capped int
		for range draws {
			next := d.Delay(0, prev, rng.Float64())
			hi := min(cap, 3*max(prev, base))
			require.True(t, base <= next && next <= hi, "decorrelated %v outside [%v, %v] after %v", next, base, hi, prev)
			if next == cap {
				capped++
			}
			prev = next
		}
		assert.Positive(t, capped, "the chain reaches the cap")
		assert.Less(t, capped, draws, "and comes down from it")
	})
}

// TestBackoffOverflow checks that no strategy overflows, goes negative or
// exceeds its cap, whatever the retry number and previous delay.
func TestBackoffOverflow(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	bounds := []struct{ base, cap time.Duration }{
		{100 * ms, 10 * time.Second},
		{time.Hour, maxDur},
		{maxDur / 2, maxDur},
		{maxDur, maxDur},
		{1, 2},
	}
	ns := []int{-5, 0, 1, 31, 32, 62, 63, 64, 65, 1000, math.MaxInt32, math.MaxInt}
	prevs := []time.Duration{-time.Second, 0, 1, maxDur / 3, maxDur/3 + 1, maxDur - 1, maxDur}
	us := []float64{0, 0.5, math.Nextafter(1, 0)}
	for _, bd := range bounds {
		strategies := []Backoff{
			exponential{bd.base, bd.cap}, FullJitter{bd.base, bd.cap},
			EqualJitter{bd.base, bd.cap}, DecorrelatedJitter{bd.base, bd.cap},
		}
		for _, s := range strategies {
			last := time.Duration(0)
			for _, n := range ns {
				for _, prev := range prevs {
					for _, u := range us {
						d := s.Delay(n, prev, u)
						require.True(t, 0 <= d && d <= bd.cap, "%T%v.Delay(%d, %v, %v) = %v", s, bd, n, prev, u, d)
					}
				}
				if e, ok := s.(exponential); ok {
					d := e.Delay(n, 0, 0)
					require.GreaterOrEqual(t, d, last, "exponential grows with n (n=%d)", n)
					last = d
				}
			}
		}
		assert.Equal(t, bd.cap, exponential{bd.base, bd.cap}.Delay(math.MaxInt, 0, 0))
	}
}

// TestHugeBackoffEndsAtTheDeadline checks the Transport's side of overflow
// safety: a strategy asking for the longest possible wait does not wait past
// the caller's deadline, it gives up at once.
func TestHugeBackoffEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(math.MaxInt64)}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()

		resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))

		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		assert.Zero(t, time.Since(start))
		assert.Len(t, base.Calls(), 1)
	})
}

// articleSleep is a sleep of the AWS article's attempt-based formulas,
// min(cap, base*2^attempt) jittered as the strategy does, for a draw u.
func articleSleep(strategy string, base, cap time.Duration, attempt int, u float64) time.Duration {
	v := min(cap, base<<attempt)
	switch strategy {
	case "full jitter":
		return time.Duration(float64(v) * u)
	case "equal jitter":
		return v/2 + time.Duration(float64(v-v/2)*u)
	}
	return v
}

// TestBackoffMapsToTheArticle pins the mapping the Backoff doc states, at
// both ends of the random draw (u = 0 and the largest u below 1, where a
// half-open range [lo, hi) gives hi less one nanosecond): Delay(n) is the
// article's formula with attempt = n, so the first retry waits up to Base
// where the simulator's first sleep (attempt 1) is up to 2*Base, and Base
// doubled gives the simulator's sleeps; decorrelated jitter starts from
// prev = Base, as the simulator's sleep does. It checks the first two waits
// both as Delay computes them and as a Transport waits them, in fake time.
func TestBackoffMapsToTheArticle(t *testing.T) {
	const base, cap = 100 * ms, 10 * time.Second
	u1 := math.Nextafter(1, 0)
	under := func(d time.Duration) time.Duration { return d - 1 } // the end of [lo, d)
	cases := []struct {
		name          string
		b             Backoff
		first, second [2]time.Duration // the wait at u = 0 and at u1
	}{
		{"exponential", exponential{base, cap}, [2]time.Duration{base, base}, [2]time.Duration{2 * base, 2 * base}},
		{"full jitter", FullJitter{base, cap}, [2]time.Duration{0, under(base)}, [2]time.Duration{0, under(2 * base)}},
		{"equal jitter", EqualJitter{base, cap}, [2]time.Duration{base / 2, under(base)}, [2]time.Duration{base, under(2 * base)}},
		// The second wait's range is [Base, 3*w) after a first wait w: w =
		// Base at u = 0, and just under 3*Base at u1.
		{"decorrelated jitter", DecorrelatedJitter{base, cap},
			[2]time.Duration{base, under(3 * base)}, [2]time.Duration{base, under(3 * under(3*base))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, u := range []float64{0, u1} {
				first := tc.b.Delay(0, 0, u)
				assert.Equal(t, tc.first[i], first, "first retry, u=%v", u)
				assert.Equal(t, tc.second[i], tc.b.Delay(1, first, u), "second retry, u=%v", u)

				if tc.name != "decorrelated jitter" {
					assert.Equal(t, articleSleep(tc.name, base, cap, 0, u), first, "the article's formula at attempt 0")
					// The simulator's first sleep is at attempt 1: twice the
					// range; a doubled Base gives it.
					sim := articleSleep(tc.name, base, cap, 1, u)
					assert.Equal(t, tc.second[i], sim, "the simulator's first sleep is this strategy's second")
					doubled := map[string]Backoff{
						"exponential":  exponential{2 * base, cap},
						"full jitter":  FullJitter{2 * base, cap},
						"equal jitter": EqualJitter{2 * base, cap},
					}[tc.name]
					assert.Equal(t, sim, doubled.Delay(0, 0, u), "Base doubled gives the simulator's first sleep")
				}

				synctest.Test(t, func(t *testing.T) {
					b := &testutil.Base{Answer: testutil.Statuses(503, 503, 200)}
					tr, _ := fakeTransport(b, Policy{Backoff: tc.b}, u)
					resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil))
					require.NoError(t, err)
					assert.Equal(t, 200, resp.StatusCode)
					assert.Equal(t, tc.first[i], b.Gap(t, 1), "the Transport's first wait, u=%v", u)
					assert.Equal(t, tc.second[i], b.Gap(t, 2), "the Transport's second wait, u=%v", u)
				})
			}
		})
	}

	// The simulator's decorrelated jitter: sleep = min(cap, U(base, 3*sleep))
	// from sleep = base, whatever the attempt; the same chain here, prev
	// being the previous wait.
	d := DecorrelatedJitter{base, cap}
	sleep, prev := base, time.Duration(0)
	for n, u := range []float64{0.5, 0.9, u1, 0.25, 0, 0.99} {
		sleep = min(cap, base+time.Duration(float64(3*sleep-base)*u))
		prev = d.Delay(n, prev, u)
		assert.Equal(t, sleep, prev, "decorrelated retry %d, u=%v", n+1, u)
	}
}
