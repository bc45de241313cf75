package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// The tests of this file run in fake time (testing/synctest): every wait
// they observe is exact to the nanosecond, and none of them sleeps.

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

				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp))
				assert.Equal(t, 2, Attempts(resp))

				asked, _ := header.ParseRetryAfter(tc.value, time.Now())
				waited := base.Gap(t, 1)
				assert.Equal(t, time.Duration(tc.wantMs)*time.Millisecond, waited.Truncate(time.Millisecond))
				assert.GreaterOrEqual(t, waited, asked, "never less than the server asked")
				assert.LessOrEqual(t, waited, asked+jitterBound(asked), "jitter at most min(10 %, 1 s)")
				require.Len(t, ev.retries, 1)
				assert.Equal(t, waited, ev.retries[0].Delay, "OnRetry reports the wait made")
				assert.Equal(t, DelayRetryAfter, ev.retries[0].Source)
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

				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp))

				// 2.75 s asked, plus half of its 10 % (137.5 ms).
				assert.Equal(t, 2887500*time.Microsecond, base.Gap(t, 1), "Retry-After: %s", value)
				require.Len(t, ev.retries, 1)
				assert.Equal(t, DelayRetryAfter, ev.retries[0].Source)
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
		source DelaySource
	}{
		{"Retry-After takes precedence over RateLimit",
			http.Header{"Retry-After": {"2"}, "Ratelimit": {`"default";r=0;t=5`}}, 2100 * time.Millisecond, DelayRetryAfter},
		{"RateLimit reset when Retry-After is absent",
			http.Header{"Ratelimit": {`"default";r=0;t=5`}}, 5250 * time.Millisecond, DelayRateLimit},
		{"longest exhausted RateLimit quota",
			http.Header{"Ratelimit": {`"minute";r=0;t=3, "burst";r=4;t=9, "hour";r=0;t=8`}}, 8400 * time.Millisecond, DelayRateLimit},
		{"RateLimit quota with requests left means backoff",
			http.Header{"Ratelimit": {`"default";r=3;t=5`}}, backoff, DelayBackoff},
		{"malformed RateLimit means backoff",
			http.Header{"Ratelimit": {`"default";r=0;t=5,`}}, backoff, DelayBackoff},
		{"garbage Retry-After means backoff",
			http.Header{"Retry-After": {"in a while"}}, backoff, DelayBackoff},
		{"Retry-After 0 means backoff",
			http.Header{"Retry-After": {"0"}}, backoff, DelayBackoff},
		{"Retry-After in the past means backoff",
			http.Header{"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT"}}, backoff, DelayBackoff},
		{"no header means backoff", nil, backoff, DelayBackoff},
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
				require.Len(t, ev.giveUps, 1)
				assert.Equal(t, tc.reason, ev.giveUps[0].Reason)
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
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, http.Header{"Retry-After": {"9"}})}
		tr, _ := fakeTransport(base, Policy{}, 0.5)

		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		assert.Equal(t, 9450*time.Millisecond, base.Gap(t, 1))
	})
}

// With a constant 1 s backoff and a deadline 2.5 s away, attempts go out at
// 0, 1 s and 2 s; a third wait would end at 3 s, past the deadline, so the
// call gives up at 2 s instead of sleeping into it.
func TestBackoffWaitNeverEndsPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		base := &testutil.Base{Answer: testutil.ResetByPeer}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 10, Backoff: Constant(time.Second)}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Nil(t, resp)
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, 3, base.Attempts())
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonDeadline, e.Reason)
		assert.Equal(t, 3, e.Attempts)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the deadline ended the call")
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the last attempt's failure")
		require.Len(t, ev.giveUps, 1)
		assert.Equal(t, ReasonDeadline, ev.giveUps[0].Reason)
	})
}

// Whatever the random sample and the deadline, no retry's wait ends at or
// past the deadline, and the call never outlives it.
func TestNoBackoffWaitEndsPastDeadline(t *testing.T) {
	for _, u := range []float64{0, 0.3, 0.7, 0.999} {
		for _, deadline := range []time.Duration{50 * time.Millisecond, 450 * time.Millisecond, 1300 * time.Millisecond, 4 * time.Second} {
			t.Run(fmt.Sprintf("u=%v/deadline=%v", u, deadline), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), deadline)
					defer cancel()
					dl, _ := ctx.Deadline()
					base := &testutil.Base{Answer: testutil.ResetByPeer}
					tr, ev := fakeTransport(base, Policy{MaxAttempts: 50, Backoff: EqualJitter{Base: 100 * time.Millisecond, Cap: time.Second}}, u)
					var late []string
					tr.OnRetry = func(e *RetryEvent) {
						ev.retries = append(ev.retries, *e)
						if end := time.Now().Add(e.Delay); !end.Before(dl) {
							late = append(late, fmt.Sprintf("retry %d waits %v, until %v past the deadline", e.Attempt, e.Delay, end.Sub(dl)))
						}
					}

					_, err := tr.RoundTrip(testutil.Get(t, ctx))

					assert.Empty(t, late)
					assert.Less(t, time.Now(), dl, "the call ended before the deadline")
					var e *Error
					require.ErrorAs(t, err, &e)
					assert.Equal(t, ReasonDeadline, e.Reason)
					assert.Equal(t, len(ev.retries)+1, e.Attempts)
				})
			})
		}
	}
}

func TestAttemptTimeoutRetriedThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return testutil.Hang(n, req)
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		tr, ev := fakeTransport(base, Policy{AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		assert.Equal(t, 2, Attempts(resp))
		assert.Equal(t, 1100*time.Millisecond, time.Since(start), "1 s attempt timeout + 100 ms backoff")
		assert.Equal(t, 1100*time.Millisecond, base.Gap(t, 1))
		require.Len(t, ev.retries, 1)
		assert.ErrorIs(t, ev.retries[0].Err, ErrAttemptTimeout)
		assert.Empty(t, ev.giveUps)
	})
}

func TestAttemptTimeoutOnEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Hang}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 3, AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		assert.Nil(t, resp)
		assert.Equal(t, 3200*time.Millisecond, time.Since(start), "3 attempts of 1 s, 2 waits of 100 ms")
		assert.Equal(t, 3, base.Attempts())
		require.ErrorIs(t, err, ErrAttemptTimeout, "the final error names the attempt timeout")
		assert.Contains(t, err.Error(), "attempt timeout (1s)")
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller had no deadline")
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonExhausted, e.Reason)
		assert.Equal(t, 3, e.Attempts)
		require.Len(t, ev.giveUps, 1)
		assert.Equal(t, ReasonExhausted, ev.giveUps[0].Reason)
	})
}

// An attempt timeout longer than the time left before the caller's deadline
// does not extend it: the deadline ends the attempt, and the call, and it is
// reported as the deadline, not as an attempt timeout.
func TestAttemptTimeoutNeverExtendsPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		parentDeadline, _ := ctx.Deadline()
		var attemptDeadline time.Time
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			attemptDeadline, _ = req.Context().Deadline()
			return testutil.Hang(n, req)
		}}
		tr, ev := fakeTransport(base, Policy{AttemptTimeout: 5 * time.Second}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Nil(t, resp)
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, parentDeadline, attemptDeadline, "the attempt runs under the caller's deadline")
		assert.Equal(t, 1, base.Attempts())
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, ErrAttemptTimeout)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonDeadline, e.Reason)
		assert.Empty(t, ev.retries)
	})
}

// Attempts of at most 1 s with 100 ms between them, under a 2.5 s deadline:
// attempt 1 times out at 1 s, attempt 2 at 2.1 s, and attempt 3, started at
// 2.2 s, is cut short by the deadline at 2.5 s, not at 3.2 s.
func TestAttemptTimeoutCutShortByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		base := &testutil.Base{Answer: testutil.Hang}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 10, AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)
		start := time.Now()

		_, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Equal(t, 2500*time.Millisecond, time.Since(start))
		assert.Equal(t, 3, base.Attempts())
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonDeadline, e.Reason)
		assert.Equal(t, 3, e.Attempts)
		require.Len(t, ev.retries, 2)
		for _, r := range ev.retries {
			assert.ErrorIs(t, r.Err, ErrAttemptTimeout)
		}
	})
}

// Headers that arrive just as the attempt timeout fires come with a body
// the timeout has already cut off (the attempt's context is canceled): such
// a response must not reach the caller; the attempt counts as timed out.
func TestResponseRacingAttemptTimeoutIsNotReturnedDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				<-req.Context().Done() // the timeout fires; the headers were already on their way
				resp := testutil.Response(req, http.StatusOK, nil, "cut off")
				resp.Body = &contextBody{ctx: req.Context(), r: resp.Body}
				return resp, nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		tr, ev := fakeTransport(base, Policy{AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		assert.Equal(t, 2, Attempts(resp))
		require.Len(t, ev.retries, 1)
		assert.ErrorIs(t, ev.retries[0].Err, ErrAttemptTimeout)
	})
}

// contextBody fails reads once ctx is done, as net/http's bodies do when
// their request's context ends.
type contextBody struct {
	ctx context.Context
	r   io.ReadCloser
}

func (b *contextBody) Read(p []byte) (int, error) {
	if err := context.Cause(b.ctx); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *contextBody) Close() error { return b.r.Close() }

// The caller cancels 3 s into a 10 s backoff wait: the call ends at that
// instant, and its error matches both the cancellation and the failure of
// the last attempt.
func TestCancelDuringBackoffWaitEndsCallAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		answer func(int, *http.Request) (*http.Response, error)
		last   func(t *testing.T, err error)
	}{
		{"after a 503", testutil.ThenOK(http.StatusServiceUnavailable, nil), func(t *testing.T, err error) {
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
		}},
		{"after a connection reset", testutil.ResetByPeer, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, syscall.ECONNRESET)
		}},
		{"after a Retry-After", testutil.ThenOK(http.StatusTooManyRequests, http.Header{"Retry-After": {"20"}}), func(t *testing.T, err error) {
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusTooManyRequests, se.StatusCode)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				base := &testutil.Base{Answer: tc.answer}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(10 * time.Second)}, 0.5)
				var canceledAt time.Time
				go func() {
					time.Sleep(3 * time.Second)
					canceledAt = time.Now()
					cancel()
				}()

				resp, err := tr.RoundTrip(testutil.Get(t, ctx))

				returnedAt := time.Now()
				synctest.Wait()
				assert.Nil(t, resp)
				assert.Equal(t, canceledAt, returnedAt, "zero fake time between cancel and return")
				assert.Equal(t, 1, base.Attempts())
				assert.ErrorIs(t, err, context.Canceled)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				tc.last(t, err)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, ReasonCanceled, e.Reason)
				require.Len(t, ev.giveUps, 1)
				assert.Equal(t, ReasonCanceled, ev.giveUps[0].Reason)
			})
		})
	}
}

// The deadline passes while an attempt is in flight: the call ends then,
// with an error matching both context.DeadlineExceeded and the attempt's own.
func TestDeadlineDuringAttemptEndsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		errUpstream := errors.New("upstream stalled")
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return testutil.ResetByPeer(n, req)
			}
			<-req.Context().Done()
			return nil, errors.Join(errUpstream, req.Context().Err())
		}}
		tr, _ := fakeTransport(base, Policy{Backoff: Constant(500 * time.Millisecond)}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Nil(t, resp)
		assert.Equal(t, 1500*time.Millisecond, time.Since(start))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errUpstream, "the last attempt's failure")
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonDeadline, e.Reason)
		assert.Equal(t, 2, e.Attempts)
	})
}
