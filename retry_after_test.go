package retryhttp

// A server's wait (Retry-After in seconds or as a date, its millisecond
// variants, RateLimit, X-RateLimit-Reset) sets the delay before the retry,
// with a jitter of at most min(10 %, 1 s); a wait too long or past the
// deadline is not waited. The tests in fake time (testing/synctest)
// observe every wait exact to the nanosecond.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// The millisecond wait hints are read before Retry-After, with the same
// caps and deadline rules.
func TestMillisecondRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		wait   time.Duration // between the attempts; 0: no retry
		source string
	}{
		{"Retry-After-Ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, "Retry-After"},
		{"X-Ms-Retry-After-Ms", http.Header{"X-Ms-Retry-After-Ms": {"250"}}, 250 * time.Millisecond, "Retry-After"},
		{"X-Amz-Retry-After", http.Header{"X-Amz-Retry-After": {"400"}}, 400 * time.Millisecond, "Retry-After"},
		{"a fraction", http.Header{"Retry-After-Ms": {"20.5"}}, 20500 * time.Microsecond, "Retry-After"},
		{"before Retry-After", http.Header{"Retry-After-Ms": {"300"}, "Retry-After": {"5"}}, 300 * time.Millisecond, "Retry-After"},
		{"garbage: Retry-After", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second, "Retry-After"},
		{"garbage alone: the backoff", http.Header{"Retry-After-Ms": {"-5"}}, 100 * time.Millisecond, "backoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, tc.header)}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(100 * time.Millisecond)}, 0)
				getOK(t, tr)
				assert.Equal(t, tc.wait, base.Gap(t, 1))
				require.Len(t, ev.retries, 1)
				assert.Equal(t, tc.source, ev.retries[0].Source)
			})
		})
	}
	t.Run("longer than MaxRetryAfter: not waited", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"60000"}})}
			tr, ev := fakeTransport(base, Policy{MaxRetryAfter: 30 * time.Second}, 0)
			resp, _ := getOK(t, tr)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Equal(t, []Reason{ReasonRetryAfter}, ev.reasons())
		})
	})
	t.Run("past the deadline: not waited", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After-Ms": {"900"}})}
			tr, ev := fakeTransport(base, Policy{}, 0)
			ctx := testutil.WithTimeout(t, 500*time.Millisecond)
			start := time.Now()
			sendOK(t, tr, testutil.Get(t, ctx))
			assert.Zero(t, time.Since(start), "returned at once")
			assert.Equal(t, []Reason{ReasonDeadline}, ev.reasons())
		})
	})
}

// X-RateLimit-Reset sets the wait of a spent rate limit, as a Unix time or
// as seconds, for a 429 and for a 403 that says its limit is spent.
func TestXRateLimitReset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		header func(now time.Time) http.Header
		wait   time.Duration // 0: not retried
	}{
		{"429, seconds", 429, func(time.Time) http.Header {
			return http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"7"}}
		}, 7 * time.Second},
		{"403, Unix time", 403, func(now time.Time) http.Header {
			return http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(now.Add(12 * time.Second).Unix())}}
		}, 12 * time.Second},
		{"403 with quota left: not a rate limit", 403, func(time.Time) http.Header {
			return http.Header{"X-Ratelimit-Remaining": {"10"}, "X-Ratelimit-Reset": {"7"}}
		}, 0},
		{"RateLimit t= stays first", 429, func(time.Time) http.Header {
			return http.Header{"Ratelimit": {`"q";r=0;t=3`}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"7"}}
		}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := tc.header(time.Now().Truncate(time.Second))
				base := &testutil.Base{Answer: testutil.ThenOK(tc.code, h)}
				tr, ev := fakeTransport(base, Policy{}, 0)
				getOK(t, tr)
				if tc.wait == 0 {
					assert.Equal(t, 1, base.Attempts())
					return
				}
				assert.Equal(t, tc.wait, base.Gap(t, 1))
				require.Len(t, ev.retries, 1)
				assert.Equal(t, "RateLimit", ev.retries[0].Source)
			})
		})
	}
}

// jitterBound is the largest jitter added to a server's requested wait d.
func jitterBound(d time.Duration) time.Duration { return min(d/10, time.Second) }

func TestRetryAfterSecondsWaitedExactly(t *testing.T) {
	tests := []struct {
		value  string
		maxRA  time.Duration
		u      float64
		wantMs int64 // the wait between the two attempts, in milliseconds
	}{
		{"1", 0, 0, 1000},        // no jitter when the sample is 0
		{"2", 0, 0.5, 2100},      // 2 s + half of 200 ms
		{"5", 0, 0.999999, 5499}, // just under the 10 % bound
		{"20", 0, 0.5, 20500},    // 10 % would be 2 s: the jitter is capped at 1 s
		{"30", 0, 0.5, 30500},    // exactly MaxRetryAfter is waited, jitter included
		{"120", 5 * time.Minute, 0.25, 120250},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("Retry-After %s, u=%v", tc.value, tc.u), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After": {tc.value}})}
				tr, ev := fakeTransport(base, Policy{MaxRetryAfter: tc.maxRA}, tc.u)

				resp, body := getOK(t, tr)
				assert.Equal(t, "ok", body)
				assert.Equal(t, 2, Attempts(resp))

				asked, _ := header.ParseRetryAfter(tc.value, time.Now())
				waited := base.Gap(t, 1)
				assert.Equal(t, time.Duration(tc.wantMs)*time.Millisecond, waited.Truncate(time.Millisecond))
				assert.GreaterOrEqual(t, waited, asked, "never less than the server asked")
				assert.LessOrEqual(t, waited, asked+jitterBound(asked), "jitter at most min(10 %, 1 s)")
				require.Len(t, ev.retries, 1)
				assert.Equal(t, waited, ev.retries[0].Delay, "OnRetry reports the wait made")
				assert.Equal(t, "Retry-After", ev.retries[0].Source)
				assert.Empty(t, ev.giveUps)
			})
		})
	}
}

// A Retry-After date is honoured to the millisecond even when the response
// arrives in the middle of a second: the request is made 250 ms past a
// whole second and the server names the instant 3 s after that second.
func TestRetryAfterHTTPDateWaitedExactly(t *testing.T) {
	forms := map[string]string{
		"IMF-fixdate": http.TimeFormat,
		"RFC 850":     "Monday, 02-Jan-06 15:04:05 GMT",
		"asctime":     time.ANSIC,
	}
	for name, layout := range forms {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				second := time.Now().UTC().Truncate(time.Second)
				time.Sleep(250 * time.Millisecond)
				value := second.Add(3 * time.Second).Format(layout)
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusTooManyRequests, http.Header{"Retry-After": {value}})}
				tr, ev := fakeTransport(base, Policy{}, 0.5)

				_, body := getOK(t, tr)
				assert.Equal(t, "ok", body)

				// 2.75 s asked, plus half of its 10 % (137.5 ms).
				assert.Equal(t, 2887500*time.Microsecond, base.Gap(t, 1), "Retry-After: %s", value)
				require.Len(t, ev.retries, 1)
				assert.Equal(t, "Retry-After", ev.retries[0].Source)
			})
		})
	}
}

func TestServerWaitSourcesInTheRetryLoop(t *testing.T) {
	const backoff = 700 * time.Millisecond
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		source string
	}{
		{"Retry-After takes precedence over RateLimit",
			http.Header{"Retry-After": {"2"}, "Ratelimit": {`"default";r=0;t=5`}}, 2100 * time.Millisecond, "Retry-After"},
		{"RateLimit reset when Retry-After is absent",
			http.Header{"Ratelimit": {`"default";r=0;t=5`}}, 5250 * time.Millisecond, "RateLimit"},
		{"longest exhausted RateLimit quota",
			http.Header{"Ratelimit": {`"minute";r=0;t=3, "burst";r=4;t=9, "hour";r=0;t=8`}}, 8400 * time.Millisecond, "RateLimit"},
		{"RateLimit quota with requests left means backoff",
			http.Header{"Ratelimit": {`"default";r=3;t=5`}}, backoff, "backoff"},
		{"malformed RateLimit means backoff",
			http.Header{"Ratelimit": {`"default";r=0;t=5,`}}, backoff, "backoff"},
		{"garbage Retry-After means backoff",
			http.Header{"Retry-After": {"in a while"}}, backoff, "backoff"},
		{"Retry-After 0 means backoff",
			http.Header{"Retry-After": {"0"}}, backoff, "backoff"},
		{"Retry-After in the past means backoff",
			http.Header{"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT"}}, backoff, "backoff"},
		{"no header means backoff", nil, backoff, "backoff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, tc.header)}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(backoff)}, 0.5)

				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()

				assert.Equal(t, tc.want, base.Gap(t, 1))
				require.Len(t, ev.retries, 1)
				assert.Equal(t, tc.source, ev.retries[0].Source)
				assert.Equal(t, tc.want, ev.retries[0].Delay)
			})
		})
	}
}

// A wait the response asks for that is too long, or that would end at or
// past the caller's deadline, is not waited: the response itself goes back
// to the caller at once, its body unread, and the hook hears why.
func TestServerWaitNotWaitedWhenTooLong(t *testing.T) {
	tests := []struct {
		name     string
		policy   Policy
		deadline time.Duration // 0: none
		header   http.Header
		reason   Reason
	}{
		{"Retry-After over the default MaxRetryAfter", Policy{},
			0, http.Header{"Retry-After": {"31"}}, ReasonRetryAfter},
		{"saturated Retry-After", Policy{},
			0, http.Header{"Retry-After": {"99999999999999999999"}}, ReasonRetryAfter},
		{"Retry-After date an hour ahead", Policy{},
			0, http.Header{"Retry-After": {"Sat, 01 Jan 2000 01:00:00 GMT"}}, ReasonRetryAfter},
		{"RateLimit reset over MaxRetryAfter", Policy{},
			0, http.Header{"Ratelimit": {`"default";r=0;t=31`}}, ReasonRetryAfter},
		{"Retry-After over a configured MaxRetryAfter", Policy{MaxRetryAfter: 5 * time.Second},
			0, http.Header{"Retry-After": {"6"}}, ReasonRetryAfter},
		{"Retry-After past the deadline", Policy{},
			10 * time.Second, http.Header{"Retry-After": {"20"}}, ReasonDeadline},
		{"Retry-After ending exactly at the deadline", Policy{},
			10 * time.Second, http.Header{"Retry-After": {"10"}}, ReasonDeadline},
		{"jitter would carry the wait past the deadline", Policy{},
			9500 * time.Millisecond, http.Header{"Retry-After": {"9"}}, ReasonDeadline},
		{"RateLimit reset past the deadline", Policy{},
			10 * time.Second, http.Header{"Ratelimit": {`"default";r=0;t=15`}}, ReasonDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, tc.header)}
				tr, ev := fakeTransport(base, tc.policy, 0.9)
				start := time.Now()

				resp, err := tr.RoundTrip(testutil.Get(t, ctx))

				assert.Zero(t, time.Since(start), "returned in zero fake time")
				require.NoError(t, err)
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				assert.Equal(t, "busy", testutil.ReadBody(t, resp), "the body is the caller's, unread")
				assert.Equal(t, 1, base.Attempts())
				assert.Empty(t, ev.retries)
				require.Equal(t, []Reason{tc.reason}, ev.reasons())
				assert.Same(t, resp, ev.giveUps[0].Response)
				assert.NoError(t, ev.giveUps[0].Err)
				assert.Equal(t, 1, ev.giveUps[0].Attempts)
			})
		})
	}
}

// The control case of the test above: a wait that fits before the
// deadline is made.
func TestRetryAfterShorterThanDeadlineWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testutil.WithTimeout(t, 10*time.Second)
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After": {"9"}})}
		tr, _ := fakeTransport(base, Policy{}, 0.5)

		_, body := sendOK(t, tr, testutil.Get(t, ctx))
		assert.Equal(t, "ok", body)
		assert.Equal(t, 9450*time.Millisecond, base.Gap(t, 1))
	})
}

// A Retryable may set the wait on a failed answer's header (for a server
// known to leave Retry-After out): the header is read again after the hook,
// not from a scan made before it, and the retry waits what it asks.
func TestRetryableMayAddAServerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, nil)}
		p := Policy{Retryable: func(a *Attempt) bool {
			if a.Response != nil && a.Response.StatusCode == http.StatusServiceUnavailable {
				a.Response.Header.Set("Retry-After", "3")
			}
			return a.Retry
		}}
		tr, ev := fakeTransport(base, p, 0)
		start := time.Now()
		_, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
		require.Len(t, ev.retries, 1)
		assert.Equal(t, "Retry-After", ev.retries[0].Source)
		assert.Equal(t, 3*time.Second, time.Since(start), "the retry went out after the wait the hook set (jitter 0)")
	})
}

// one instant: each retry waits its own draw of the default backoff, full
// jitter over [0, 100 ms), exactly as the Backoff computes it.
func TestCrowdToldNowIsSpreadByTheBackoff(t *testing.T) {
	const crowd = 20
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]bool{}
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if !seen[req.URL.Path] {
				seen[req.URL.Path] = true
				return testutil.Response(req, http.StatusServiceUnavailable, http.Header{"Retry-After": {"0"}}, ""), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		rng := rand.New(rand.NewPCG(3, 4))
		var draws []float64
		tr := &Transport{Base: base, Budget: UnlimitedBudget(), rand: func() float64 {
			mu.Lock()
			defer mu.Unlock()
			u := rng.Float64()
			draws = append(draws, u)
			return u
		}}
		ev := new(hookLog).watch(tr)
		start := time.Now()
		waited := make([]time.Duration, crowd)
		var wg sync.WaitGroup
		for i := range crowd {
			wg.Go(func() {
				req := testutil.NewRequest(t, http.MethodGet, fmt.Sprintf("http://api.test/c/%d", i), nil)
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					assert.Equal(t, "ok", testutil.ReadBody(t, resp))
					assert.Equal(t, 2, Attempts(resp))
				}
				waited[i] = time.Since(start)
			})
		}
		wg.Wait()

		require.Len(t, draws, crowd, "one random draw per retry")
		var want []time.Duration
		for _, u := range draws {
			want = append(want, FullJitter{}.Delay(0, 0, u))
		}
		assert.ElementsMatch(t, want, waited, "each retry waited its own draw of the backoff")
		slices.Sort(waited)
		assert.Less(t, waited[crowd-1], defaultBase, "within the first retry's window")
		assert.Len(t, slices.Compact(waited), crowd, "no two retries at the same instant")
		require.Len(t, ev.retries, crowd)
		for _, e := range ev.retries {
			assert.Equal(t, "backoff", e.Source)
		}
	})
}

// A 429 asking for one second is waited for one second plus a jitter of at
// most 100 ms, measured between the two arrivals at the server.
func TestLoopback429RetryAfterOneSecond(t *testing.T) {
	srv := testutil.NewServer(t,
		retryhttptest.Status(429).WithHeader("Retry-After", "1").WithBody("slow down"),
		retryhttptest.Status(200).WithBody("welcome back"))
	tr := newTestTransport(t, Policy{})
	ev := new(hookLog).watch(tr)

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "welcome back", testutil.ReadBody(t, resp))
	assert.Equal(t, 2, Attempts(resp))
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	gap := reqs[1].Time.Sub(reqs[0].Time)
	require.Len(t, ev.retries, 1)
	delay := ev.retries[0].Delay
	assert.Equal(t, "Retry-After", ev.retries[0].Source)
	assert.GreaterOrEqual(t, delay, time.Second)
	assert.LessOrEqual(t, delay, 1100*time.Millisecond)
	assert.GreaterOrEqual(t, gap, time.Second, "never sooner than the server asked")
	assert.Less(t, gap, 1100*time.Millisecond+400*time.Millisecond, "1 s + at most 100 ms jitter + slack")
	t.Logf("429 Retry-After: 1 waited %v between arrivals (chosen wait %v)", gap.Round(time.Millisecond), delay.Round(time.Millisecond))
}

// A 403 with Retry-After, seconds or a date, is a rate limit (GitHub's
// secondary limit): retried after that wait, as a 429 is. Without it, or
// with X-RateLimit-Remaining above 0, it is returned at once; a wait past
// MaxRetryAfter returns it at once too.
func Test403WithRetryAfterIsARateLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(now time.Time) http.Header
		wait   time.Duration // 0: not retried
		reason Reason        // of the 403 returned at once: 0 for no give-up (no failure)
	}{
		{"seconds", func(time.Time) http.Header { return http.Header{"Retry-After": {"3"}} }, 3 * time.Second, 0},
		{"a date", func(now time.Time) http.Header {
			return http.Header{"Retry-After": {now.Add(5 * time.Second).UTC().Format(http.TimeFormat)}}
		}, 5 * time.Second, 0},
		{"none remaining", func(time.Time) http.Header {
			return http.Header{"Retry-After": {"2"}, "X-Ratelimit-Remaining": {"0"}}
		}, 2 * time.Second, 0},
		{"no Retry-After", func(time.Time) http.Header { return nil }, 0, 0},
		{"some remaining", func(time.Time) http.Header {
			return http.Header{"Retry-After": {"2"}, "X-Ratelimit-Remaining": {"4"}}
		}, 0, 0},
		{"past MaxRetryAfter", func(time.Time) http.Header { return http.Header{"Retry-After": {"31"}} }, 0, ReasonRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := tc.header(time.Now().Truncate(time.Second))
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusForbidden, h)}
				tr, ev := fakeTransport(base, Policy{}, 0)
				resp, _ := getOK(t, tr)
				if tc.wait == 0 {
					assert.Equal(t, http.StatusForbidden, resp.StatusCode)
					assert.Equal(t, 1, base.Attempts(), "returned at once")
					if tc.reason == 0 {
						assert.Empty(t, ev.reasons(), "a status the policy does not retry: no failure")
					} else {
						assert.Equal(t, []Reason{tc.reason}, ev.reasons())
					}
					return
				}
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, tc.wait, base.Gap(t, 1), "retried after the server's wait")
				require.Len(t, ev.retries, 1)
				assert.Equal(t, "Retry-After", ev.retries[0].Source)
			})
		})
	}
}
