package retryhttp

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A server's X-Should-Retry (or Stripe's Stripe-Should-Retry) verdict
// decides, within the method and key rules: false stops a retry the status
// would get, true asks for one the status would not.
func TestServerSaysWhetherToRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		code     int
		verdict  string
		attempts int
		reason   Reason // of the give-up, 0 if none
		field    string // the field of the verdict; "" for X-Should-Retry
	}{
		{"false stops a 503", http.MethodGet, 503, "false", 1, ReasonServer, ""},
		{"FALSE, any case", http.MethodGet, 503, " FALSE ", 1, ReasonServer, ""},
		{"true retries a 400", http.MethodGet, 400, "true", 3, ReasonExhausted, ""},
		{"true on a 503: retried as it would be", http.MethodGet, 503, "true", 3, ReasonExhausted, ""},
		{"true never retries a success", http.MethodGet, 200, "true", 1, 0, ""},
		{"false on a 404: nothing to stop", http.MethodGet, 404, "false", 1, 0, ""},
		{"true does not make a POST safe", http.MethodPost, 500, "true", 1, ReasonNotIdempotent, ""},
		{"anything else is no verdict", http.MethodGet, 503, "maybe", 3, ReasonExhausted, ""},
		{"Stripe's false stops a 500", http.MethodGet, 500, "false", 1, ReasonServer, "Stripe-Should-Retry"},
		{"Stripe's true retries a 400", http.MethodGet, 400, "true", 3, ReasonExhausted, "Stripe-Should-Retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field := cmp.Or(tc.field, "X-Should-Retry")
			base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
				return testutil.Response(req, tc.code, http.Header{field: {tc.verdict}}, "body"), nil
			}}
			tr, ev := fakeTransport(base, Policy{MaxAttempts: 3, Backoff: Constant(0)}, 0)
			resp, err := tr.RoundTrip(testutil.NewRequest(t, tc.method, "http://api.test/", nil))
			require.NoError(t, err)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Equal(t, "body", testutil.ReadBody(t, resp), "the last response, whole")
			assert.Equal(t, tc.attempts, base.Attempts())
			if tc.reason == 0 {
				assert.Empty(t, ev.giveUps)
			} else {
				assert.Equal(t, []Reason{tc.reason}, ev.reasons())
			}
		})
	}
}

// The millisecond wait hints are read before Retry-After, with the same
// caps and deadline rules.
func TestMillisecondRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		wait   time.Duration // between the attempts; 0: no retry
		source DelaySource
	}{
		{"Retry-After-Ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, DelayRetryAfter},
		{"X-Ms-Retry-After-Ms", http.Header{"X-Ms-Retry-After-Ms": {"250"}}, 250 * time.Millisecond, DelayRetryAfter},
		{"X-Amz-Retry-After", http.Header{"X-Amz-Retry-After": {"400"}}, 400 * time.Millisecond, DelayRetryAfter},
		{"a fraction", http.Header{"Retry-After-Ms": {"20.5"}}, 20500 * time.Microsecond, DelayRetryAfter},
		{"before Retry-After", http.Header{"Retry-After-Ms": {"300"}, "Retry-After": {"5"}}, 300 * time.Millisecond, DelayRetryAfter},
		{"garbage: Retry-After", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second, DelayRetryAfter},
		{"garbage alone: the backoff", http.Header{"Retry-After-Ms": {"-5"}}, 100 * time.Millisecond, DelayBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, tc.header)}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(100 * time.Millisecond)}, 0)
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				testutil.ReadBody(t, resp)
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
			resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
			require.NoError(t, err)
			testutil.ReadBody(t, resp)
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.Equal(t, []Reason{ReasonRetryAfter}, ev.reasons())
		})
	})
	t.Run("past the deadline: not waited", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After-Ms": {"900"}})}
			tr, ev := fakeTransport(base, Policy{}, 0)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			start := time.Now()
			resp, err := tr.RoundTrip(testutil.Get(t, ctx))
			require.NoError(t, err)
			testutil.ReadBody(t, resp)
			assert.Zero(t, time.Since(start), "returned at once")
			assert.Equal(t, []Reason{ReasonDeadline}, ev.reasons())
		})
	})
}

// A wait longer than MaxRetryAfter is capped and retried when the policy
// says so, never past the deadline.
func TestLongRetryAfterCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After": {"3600"}})}
		tr, ev := fakeTransport(base, Policy{MaxRetryAfter: 5 * time.Second, LongRetryAfter: CapLongRetryAfter}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 5*time.Second, base.Gap(t, 1), "capped at MaxRetryAfter")
		require.Len(t, ev.retries, 1)

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		base2 := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After": {"3600"}})}
		tr2, ev2 := fakeTransport(base2, Policy{MaxRetryAfter: 5 * time.Second, LongRetryAfter: CapLongRetryAfter}, 0)
		resp, err = tr2.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, []Reason{ReasonDeadline}, ev2.reasons(), "the capped wait still may not pass the deadline")
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
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				testutil.ReadBody(t, resp)
				if tc.wait == 0 {
					assert.Equal(t, 1, base.Attempts())
					return
				}
				assert.Equal(t, tc.wait, base.Gap(t, 1))
				require.Len(t, ev.retries, 1)
				assert.Equal(t, DelayRateLimit, ev.retries[0].Source)
			})
		})
	}
}
