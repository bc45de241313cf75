package retryhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/respbody"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// Odd bases, odd bodies and hostile servers: each gets a clear error or the
// documented fallback, never a panic, a hang, or a body left open.

// A stream body (unknown length, no GetBody) whose first attempt was
// refused at dial is handed to a second attempt; when that attempt is then
// not made (the retry's wait in the budget's line ends before the caller's
// deadline, or the caller cancels the wait), the caller's body must still
// be closed.
func TestStreamBodyClosedWhenTheRetryIsNotMade(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *Budget
		cancel bool
		reason Reason
	}{
		{"the budget's line ends before the deadline", NewBudget(0, 0), false, ReasonBudget},
		{"caller cancels the wait", UnlimitedBudget(), true, ReasonCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.Refused}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(10 * time.Millisecond)}, 0.5)
				tr.Budget = tc.budget
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond) // before a probe
				defer cancel()
				if tc.cancel {
					ctx, cancel = context.WithCancel(t.Context())
					defer cancel()
					time.AfterFunc(5*time.Millisecond, cancel)
				}
				body := testutil.NewCloseRecorder(strings.NewReader("stream"))
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/upload", body)
				require.NoError(t, err)
				req.ContentLength = -1 // unknown length: sent as a stream
				_, err = tr.RoundTrip(req)
				require.Error(t, err)
				assert.ErrorIs(t, err, syscall.ECONNREFUSED)
				require.Len(t, ev.giveUps, 1)
				assert.Equal(t, tc.reason, ev.giveUps[0].Reason)
				assert.Equal(t, 1, body.Closes(), "the caller's body is closed exactly once")
			})
		})
	}
}

// http.Client accepts a response with a nil Body from its transport; a
// Transport over such a base must not panic, with or without the body
// wrapper of AttemptTimeout, and on the retry path that drains it.
func TestNilResponseBodyFromBase(t *testing.T) {
	for _, p := range []Policy{{}, {AttemptTimeout: time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				code := http.StatusOK
				if n == 1 {
					code = http.StatusServiceUnavailable
				}
				return &http.Response{StatusCode: code, Header: http.Header{}, Request: req}, nil
			}}
			tr, _ := fakeTransport(base, p, 0)
			resp, err := (&http.Client{Transport: tr}).Do(testutil.Get(t, t.Context()))
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "", testutil.ReadBody(t, resp))
			assert.Equal(t, 2, base.Attempts())
		})
	}
}

// HTTP/2 reports a request whose context was canceled as context.Canceled,
// whatever the cause. When the cause was the attempt timeout, the error
// must not claim the caller canceled.
func TestAttemptTimeoutIsNotTheCallersCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			<-req.Context().Done()
			return nil, req.Context().Err() // context.Canceled, as the HTTP/2 client reports it
		}}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 2, AttemptTimeout: time.Second, Backoff: Constant(0)}, 0)
		_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrAttemptTimeout)
		assert.NotErrorIs(t, err, context.Canceled, "the caller canceled nothing")
		require.Len(t, ev.retries, 1, "the attempt timeout was retried")
		require.Len(t, ev.giveUps, 1)
		assert.Equal(t, ReasonExhausted, ev.giveUps[0].Reason)
	})
}

// stallingFailure answers the first attempt with a 503 (and header h) whose
// body sends a few bytes and then nothing until the attempt's context ends,
// and every later attempt with 200 "ok".
func stallingFailure(h http.Header) *testutil.Base {
	return &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n > 1 {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte("partial"))
			<-req.Context().Done() // the rest never comes
			pw.CloseWithError(req.Context().Err())
		}()
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h,
			Body: pr, ContentLength: 100, Request: req}, nil
	}}
}

// A failed attempt's body that stalls after a few bytes cannot hold the
// retry hostage when the attempt's context is the Transport's own: the
// drain counts toward the wait before the retry, is cut off when that wait
// is over (but no sooner than respbody.MinTime and no later than respbody.MaxTime),
// and the next attempt goes out on time.
func TestStalledFailureBodyDrainIsBounded(t *testing.T) {
	for _, tc := range []struct {
		delay, drain, next time.Duration // the backoff, the drain, the retry's start
	}{
		{0, respbody.MinTime, respbody.MinTime},
		{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{5 * time.Second, respbody.MaxTime, 5 * time.Second},
	} {
		t.Run("backoff "+tc.delay.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := stallingFailure(nil)
				tr, ev := fakeTransport(base, Policy{AttemptTimeout: time.Minute, Backoff: Constant(tc.delay)}, 0)
				start := time.Now()
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp))
				assert.Equal(t, tc.next, base.Gap(t, 1), "the retry went out on time")
				assert.Equal(t, tc.next, time.Since(start))
				require.Len(t, ev.retries, 1)
				assert.Equal(t, tc.delay, ev.retries[0].Delay)
			})
		})
	}
}

// With 2.5 s left, a 503 asking for 2 s whose body stalls: the drain runs
// within those 2 s, and the retry goes out at 2 s, inside the deadline,
// instead of after a drain and then a full 2 s wait.
func TestStalledDrainCountsTowardRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := stallingFailure(http.Header{"Retry-After": {"2"}})
		tr, ev := fakeTransport(base, Policy{AttemptTimeout: time.Minute}, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err, "the retry was sent before the deadline")
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		assert.Equal(t, 2*time.Second, base.Gap(t, 1))
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Empty(t, ev.giveUps)
	})
}

// The same on a real connection, with no AttemptTimeout and no deadline:
// the 503's body promises 100 bytes and sends none, and the drain gives up
// after respbody.MinTime (the backoff is 0) by closing the body, which net/http
// turns into closing the connection; the retry goes out on a new one.
func TestLoopbackStalledFailureBodyDrainIsBounded(t *testing.T) {
	stall := retryhttptest.Status(503).WithBody(strings.Repeat("x", 100)).SlowBody(time.Hour)
	srv := testutil.NewServer(t, stall, retryhttptest.Status(200).WithBody("ok"))
	tr := newTestTransport(t, Policy{})
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, "ok", testutil.ReadBody(t, resp))
	assert.GreaterOrEqual(t, elapsed, respbody.MinTime)
	assert.Less(t, elapsed, respbody.MaxTime, "the stalled drain was cut off")
	assert.Equal(t, 2, srv.Conns(), "the stalled connection was given up")
}

// A small body without GetBody is read before the first attempt so it can
// be replayed. If its producer stalls, the caller's deadline still ends the
// call, with the deadline's error, and nothing is sent.
func TestStalledBufferedBodyEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
		tr, _ := fakeTransport(base, Policy{}, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("half")) // of a declared 8 bytes; then nothing
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/doc", pr)
		require.NoError(t, err)
		req.ContentLength = 8
		start := time.Now()
		_, err = tr.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Zero(t, base.Attempts(), "nothing was sent")
	})
}

// pipeBody is a request body whose reads block on a pipe; Close ends them,
// and every Close is counted.
type pipeBody struct {
	*io.PipeReader
	closes atomic.Int32
}

func (b *pipeBody) Close() error {
	b.closes.Add(1)
	return b.PipeReader.Close()
}

// The caller's body is closed exactly once when the caller's context ends
// while the body is being buffered: by the context's end, not again after.
func TestBufferedBodyClosedOnceWhenCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
		tr, _ := fakeTransport(base, Policy{}, 0)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		pr, pw := io.Pipe()
		defer pw.Close()
		body := &pipeBody{PipeReader: pr}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/doc", body)
		require.NoError(t, err)
		req.ContentLength = 8
		_, err = tr.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		synctest.Wait() // for any close still on its way
		assert.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed exactly once")
		assert.Zero(t, base.Attempts(), "nothing was sent")
	})
}

// A body longer or shorter than its ContentLength is refused before
// anything is sent, as net/http refuses it.
func TestBufferedBodyLengthMustMatchContentLength(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		cl   int64
	}{
		{"longer", "0123456789", 4},
		{"shorter", "01", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
			tr, _ := fakeTransport(base, Policy{}, 0)
			body := testutil.NewCloseRecorder(strings.NewReader(tc.body))
			req, err := http.NewRequest(http.MethodPut, "http://api.test/doc", body)
			require.NoError(t, err)
			req.ContentLength = tc.cl
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, ErrBodyLength)
			assert.Zero(t, base.Attempts(), "nothing was sent")
			assert.Equal(t, 1, body.Closes())
		})
	}
}

// MaxAttempts 1 means no retries, not no policy: the attempt timeout still
// bounds the attempt, keys are still added, and the give-up is reported.
func TestSingleAttemptPolicyStillApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Hang}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 1, AttemptTimeout: 2 * time.Second}, 0)
		start := time.Now()
		_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		assert.ErrorIs(t, err, ErrAttemptTimeout)
		assert.Equal(t, 2*time.Second, time.Since(start))
		require.Len(t, ev.giveUps, 1)
		assert.Equal(t, ReasonNoRetries, ev.giveUps[0].Reason)
	})
	var key string
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		key = req.Header.Get(defaultKeyHeader)
		return testutil.Response(req, http.StatusCreated, nil, ""), nil
	}}
	tr, _ := fakeTransport(base, Policy{MaxAttempts: 1, IdempotencyKeys: &IdempotencyKeys{}}, 0)
	req, err := http.NewRequest(http.MethodPost, "http://api.test/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.NotEmpty(t, key, "the key is added even without retries")
}

// An empty Idempotency-Key is no key: a server cannot deduplicate by it, so
// the POST is not retried after it may have been applied.
func TestEmptyIdempotencyKeyIsNoKey(t *testing.T) {
	base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, nil)}
	tr, ev := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	req, err := http.NewRequest(http.MethodPost, "http://api.test/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 1, base.Attempts())
	require.Len(t, ev.giveUps, 1)
	assert.Equal(t, ReasonNotIdempotent, ev.giveUps[0].Reason)
}

// Methods are case-sensitive (RFC 9110 section 9.1): "post" is not POST and
// gets no key from the default Methods.
func TestKeyMethodsAreCaseSensitive(t *testing.T) {
	k := (&IdempotencyKeys{}).compile()
	assert.True(t, k.applies(http.MethodPost))
	assert.False(t, k.applies("post"))
}

// Nested Transports sharing one Budget: the inner one, the outer's Base,
// sends each of the outer's attempts once and asks nothing of the budget:
// the outer's retry spends one retry of credit, and only it.
func TestNestedTransportsCreditASharedBudgetOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 2) // two retries, never earned back (refilled at 0.2 a second)
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, nil)}
		inner := &Transport{Base: base, Budget: b}
		outer := &Transport{Base: inner, Budget: b, Policy: Policy{MaxAttempts: 10, Backoff: Constant(0)}}
		resp, err := outer.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 2, base.Attempts())
		assert.Equal(t, Stats{Requests: 2, Attempts: 2, GiveUps: map[Reason]uint64{}}, inner.Stats(),
			"the inner sent each attempt once")
		l := b.machine().Start("api.test")
		defer l.End()
		assert.True(t, l.Spend(time.Now()), "one retry of credit left")
		assert.False(t, l.Spend(time.Now()), "and only one: the retry was paid once")
	})
}

// A Transport that is the Base of another sends every attempt once, the
// first included: only the outer Transport retries, with its own policy.
func TestTransportAsDirectBaseSendsEachAttemptOnce(t *testing.T) {
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
	}}
	inner := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Backoff: Constant(0)}}
	outer, ev := fakeTransport(inner, Policy{MaxAttempts: 3, Backoff: Constant(0)}, 0)
	resp, err := outer.RoundTrip(testutil.Get(t, context.Background()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, 3, base.Attempts(), "the outer's 3 attempts, each sent once")
	assert.Equal(t, 3, Attempts(resp))
	assert.Zero(t, inner.Stats().Retries)
	require.Len(t, ev.giveUps, 1)
	assert.Equal(t, ReasonExhausted, ev.giveUps[0].Reason)
}

// A retry the budget granted but the caller canceled during its wait was
// never sent: the budget takes it back.
func TestCanceledWaitGivesTheRetryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 1) // one retry, never earned back
		base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK)}
		tr, _ := fakeTransport(base, Policy{Backoff: Constant(time.Second)}, 0)
		tr.Budget = b

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel) // during the first wait
		_, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.ErrorIs(t, err, context.Canceled)

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, 2, Attempts(resp), "the one retry is still there")
	})
}
