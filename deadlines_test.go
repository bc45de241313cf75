package retryhttp

// No wait ends past the caller's deadline: a retry whose wait would gives
// up at once, and the error says the deadline ended the request; the
// caller's cancellation ends a wait at once. A timeout reads as a timeout
// through retryhttp exactly when it does through the bare transport. The
// tests in fake time (testing/synctest) observe every wait exact to the
// nanosecond.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// With a constant 1 s backoff and a deadline 2.5 s away, attempts go out at
// 0, 1 s and 2 s; a third wait would end at 3 s, past the deadline, so the
// call gives up at 2 s instead of sleeping into it.
func TestBackoffWaitNeverEndsPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testutil.WithTimeout(t, 2500*time.Millisecond)
		base := &testutil.Base{Answer: testutil.ResetByPeer}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 10, Backoff: Constant(time.Second)}, 0.5)
		start := time.Now()

		resp, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Nil(t, resp)
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, 3, base.Attempts())
		gaveUp(t, err, ReasonDeadline, 3)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the deadline ended the call")
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the last attempt's failure")
		require.Equal(t, []Reason{ReasonDeadline}, ev.reasons())
	})
}

// Whatever the random sample and the deadline, no retry's wait ends at or
// past the deadline, and the call never outlives it.
func TestNoBackoffWaitEndsPastDeadline(t *testing.T) {
	for _, u := range []float64{0, 0.3, 0.7, 0.999} {
		for _, deadline := range []time.Duration{50 * time.Millisecond, 450 * time.Millisecond, 1300 * time.Millisecond, 4 * time.Second} {
			t.Run(fmt.Sprintf("u=%v/deadline=%v", u, deadline), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx := testutil.WithTimeout(t, deadline)
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
					gaveUp(t, err, ReasonDeadline, len(ev.retries)+1)
				})
			})
		}
	}
}

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
			var se *statusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
		}},
		{"after a connection reset", testutil.ResetByPeer, func(t *testing.T, err error) {
			assert.ErrorIs(t, err, syscall.ECONNRESET)
		}},
		{"after a Retry-After", testutil.ThenOK(http.StatusTooManyRequests, http.Header{"Retry-After": {"20"}}), func(t *testing.T, err error) {
			var se *statusError
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
				gaveUp(t, err, ReasonCanceled, 0)
				require.Equal(t, []Reason{ReasonCanceled}, ev.reasons())
			})
		})
	}
}

// The deadline passes while an attempt is in flight: the call ends then,
// with an error matching both context.DeadlineExceeded and the attempt's own.
func TestDeadlineDuringAttemptEndsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testutil.WithTimeout(t, 1500*time.Millisecond)
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
		gaveUp(t, err, ReasonDeadline, 2)
	})
}

// A Transport that gives up before the deadline, because the next wait
// would end past it, reports the deadline as the caller's context would
// have at the deadline: errors.Is(err, context.DeadlineExceeded) and a
// timeout, directly and through an http.Client, while the context is not
// done yet. Cancellation is not a deadline.
func TestGivingUpBeforeTheDeadlineIsTheDeadlinesError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &testutil.Base{Answer: testutil.ResetByPeer}, Policy: Policy{Backoff: Constant(time.Second)}}
		client := &http.Client{Transport: tr}
		ctx := testutil.WithTimeout(t, 1500*time.Millisecond)
		start := time.Now()

		_, err := client.Do(testutil.Get(t, ctx))

		assert.Equal(t, time.Second, time.Since(start), "given up before the deadline")
		assert.NoError(t, ctx.Err(), "the context is not done yet")
		e := gaveUp(t, err, ReasonDeadline, 0)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, e.Timeout())
		assert.True(t, os.IsTimeout(err), "through the client's *url.Error")
	})
	synctest.Test(t, func(t *testing.T) {
		tr := &Transport{Base: &testutil.Base{Answer: testutil.ResetByPeer}, Policy: Policy{Backoff: Constant(time.Second)}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)

		_, err := tr.RoundTrip(testutil.Get(t, ctx))

		e := gaveUp(t, err, ReasonCanceled, 0)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, e.Timeout())
	})
}

// TestCallerCancelDuringBackoffEndsPromptly cancels a request in the middle
// of an hour-long wait: it returns at the moment of cancellation, as an
// *Error that is context.Canceled and names the retried status.
func TestCallerCancelDuringBackoffEndsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(time.Hour)}}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()

		_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))

		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.ErrorIs(t, err, context.Canceled)
		gaveUp(t, err, ReasonCanceled, 1)
		var se *statusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 503, se.StatusCode)
		assert.Len(t, base.Calls(), 1)
	})
}

// timeoutReading is how a timeout error reads to the common checks.
type timeoutReading struct {
	netError  bool // err.(net.Error).Timeout()
	osTimeout bool // os.IsTimeout(err)
}

func readTimeout(err error) timeoutReading {
	ne, ok := err.(net.Error)
	return timeoutReading{netError: ok && ne.Timeout(), osTimeout: os.IsTimeout(err)}
}

// A failure reads as a timeout through retryhttp exactly when it does
// through the bare transport, both from RoundTrip and through http.Client's
// *url.Error.
func TestTimeoutsReadAsTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		step    retryhttptest.Step
		base    func(*http.Transport)
		ctx     func() (context.Context, context.CancelFunc)
		timeout bool
	}{
		{
			name:    "ResponseHeaderTimeout",
			step:    retryhttptest.Hang(),
			base:    func(b *http.Transport) { b.ResponseHeaderTimeout = 30 * time.Millisecond },
			timeout: true,
		},
		{
			name: "the caller's deadline",
			step: retryhttptest.Hang(),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			timeout: true,
		},
		{
			name: "the caller's cancellation",
			step: retryhttptest.Hang(),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			},
		},
		{name: "a reset", step: retryhttptest.Reset()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testutil.NewServer(t, tc.step)
			send := func(rt http.RoundTripper) (direct, viaClient error) {
				for i := range 2 {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if tc.ctx != nil {
						ctx, cancel = tc.ctx()
					}
					req := testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx)
					var resp *http.Response
					var err error
					if i == 0 {
						resp, err = rt.RoundTrip(req)
						direct = err
					} else {
						resp, err = (&http.Client{Transport: rt}).Do(req)
						viaClient = err
					}
					cancel()
					if resp != nil {
						resp.Body.Close()
					}
					require.Error(t, err)
				}
				return direct, viaClient
			}
			bare := testutil.LoopbackBase(t)
			if tc.base != nil {
				tc.base(bare)
			}
			bareDirect, bareClient := send(bare)
			base := testutil.LoopbackBase(t)
			if tc.base != nil {
				tc.base(base)
			}
			tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{MaxAttempts: 2, Backoff: Constant(0)}}
			direct, viaClient := send(tr)

			want := timeoutReading{netError: tc.timeout, osTimeout: tc.timeout}
			assert.Equal(t, want, readTimeout(bareDirect), "bare transport: %v", bareDirect)
			assert.Equal(t, want, readTimeout(bareClient), "bare transport through a client: %v", bareClient)
			assert.Equal(t, want, readTimeout(direct), "retryhttp: %v", direct)
			assert.Equal(t, want, readTimeout(viaClient), "retryhttp through a client: %v", viaClient)
		})
	}
}

// errors.Is and errors.As still see through an *Error that is a timeout.
func TestTimeoutErrorUnwraps(t *testing.T) {
	e := &Error{Attempts: 2, Reason: ReasonDeadline, Err: io.ErrUnexpectedEOF, ctxErr: context.DeadlineExceeded}
	assert.True(t, e.Timeout())
	assert.True(t, errors.Is(e, context.DeadlineExceeded))
	e = &Error{Attempts: 2, Reason: ReasonCanceled, Err: io.ErrUnexpectedEOF, ctxErr: context.Canceled}
	assert.False(t, e.Timeout())
}
