package retryhttp

// Policy.AttemptTimeout bounds each attempt's wait for its answer's header
// (and body, under BufferResponse), never past the caller's deadline; an
// attempt it ends is retried and reported as ErrAttemptTimeout. The tests
// on real servers on loopback run in real time, with generous bounds: they
// prove that nothing waits for a timeout it should not, without failing on
// a loaded machine.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// The first attempt reaches a server that never answers it; the attempt
// timeout (100 ms) abandons it and the second attempt gets the answer, long
// before the caller's 5 s deadline.
func TestLoopbackHungAttemptRescuedByAttemptTimeout(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Hang(), retryhttptest.Status(200).WithBody("rescued"))
	const attemptTimeout = 100 * time.Millisecond
	tr := newTestTransport(t, Policy{AttemptTimeout: attemptTimeout, Backoff: Constant(10 * time.Millisecond)})
	ev := new(hookLog).watch(tr)
	ctx := testutil.WithTimeout(t, 5*time.Second)
	start := time.Now()

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx))

	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, "rescued", testutil.ReadBody(t, resp))
	assert.Equal(t, 2, Attempts(resp))
	assert.Len(t, srv.Requests(), 2)
	require.Len(t, ev.retries, 1)
	assert.ErrorIs(t, ev.retries[0].Err, ErrAttemptTimeout)
	assert.GreaterOrEqual(t, elapsed, attemptTimeout, "the first attempt had its full time")
	assert.Less(t, elapsed, time.Second, "rescued well inside the 5 s deadline")
	t.Logf("hung attempt rescued after %v (attempt timeout %v, backoff 10ms)", elapsed.Round(time.Millisecond), attemptTimeout)
}

// The server sends the headers at once and then 1 MiB in ten pieces over
// 300 ms, three times the attempt timeout. The attempt timeout covers the
// wait for the headers only: the caller reads the whole body, intact, from
// one attempt.
func TestLoopbackSlowBodyOutlivesAttemptTimeout(t *testing.T) {
	const attemptTimeout = 100 * time.Millisecond
	body := testutil.Payload(1 << 20)
	srv := testutil.NewServer(t, retryhttptest.Status(200).WithBody(string(body)).SlowBody(3*attemptTimeout))
	tr := newTestTransport(t, Policy{AttemptTimeout: attemptTimeout})
	var attemptCtx context.Context // the context the base sent the attempt with
	base := tr.Base
	tr.Base = testutil.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return base.RoundTrip(r)
	})
	start := time.Now()

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	headers := time.Since(start)

	// Read past the middle of the body: its sixth piece leaves the server
	// 180 ms after the headers, so an attempt timer still running would
	// have fired and canceled the attempt.
	h := sha256.New()
	_, err = io.CopyN(h, resp.Body, 1<<19+1)
	require.NoError(t, err)
	assert.NoError(t, attemptCtx.Err(), "the attempt is not canceled while the body is read")
	_, err = io.Copy(h, resp.Body)
	require.NoError(t, err, "the body is read to its end without a timeout")
	read := time.Since(start)
	assert.ErrorIs(t, attemptCtx.Err(), context.Canceled, "the attempt is released at EOF")
	assert.NoError(t, resp.Request.Context().Err(), "the response's request keeps the caller's context")
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, testutil.SHA256Hex(body), hex.EncodeToString(h.Sum(nil)), "1 MiB received intact")
	assert.Equal(t, 1, Attempts(resp))
	assert.Len(t, srv.Requests(), 1)
	assert.GreaterOrEqual(t, read, 3*attemptTimeout, "the body took three attempt timeouts to arrive")
	t.Logf("headers after %v; 1 MiB read after %v (attempt timeout %v)",
		headers.Round(time.Millisecond), read.Round(time.Millisecond), attemptTimeout)
}

func TestAttemptTimeoutRetriedThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.OnceThenOK(testutil.Hang)}
		tr, ev := fakeTransport(base, Policy{AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)
		start := time.Now()

		resp, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
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
		gaveUp(t, err, ReasonExhausted, 3)
		require.Equal(t, []Reason{ReasonExhausted}, ev.reasons())
	})
}

// An attempt timeout longer than the time left before the caller's deadline
// does not extend it: the deadline ends the attempt, and the call, and it is
// reported as the deadline, not as an attempt timeout.
func TestAttemptTimeoutNeverExtendsPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testutil.WithTimeout(t, 2*time.Second)
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
		gaveUp(t, err, ReasonDeadline, 0)
		assert.Empty(t, ev.retries)
	})
}

// Attempts of at most 1 s with 100 ms between them, under a 2.5 s deadline:
// attempt 1 times out at 1 s, attempt 2 at 2.1 s, and attempt 3, started at
// 2.2 s, is cut short by the deadline at 2.5 s, not at 3.2 s.
func TestAttemptTimeoutCutShortByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := testutil.WithTimeout(t, 2500*time.Millisecond)
		base := &testutil.Base{Answer: testutil.Hang}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 10, AttemptTimeout: time.Second, Backoff: Constant(100 * time.Millisecond)}, 0.5)
		start := time.Now()

		_, err := tr.RoundTrip(testutil.Get(t, ctx))

		assert.Equal(t, 2500*time.Millisecond, time.Since(start))
		assert.Equal(t, 3, base.Attempts())
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		gaveUp(t, err, ReasonDeadline, 3)
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

		resp, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
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
		require.Equal(t, []Reason{ReasonExhausted}, ev.reasons())
	})
}

// An attempt timeout that exhausts the attempts reads as a timeout.
func TestAttemptTimeoutGiveUpReadsAsTimeout(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Hang())
	tr := newTestTransport(t, Policy{MaxAttempts: 2, AttemptTimeout: 20 * time.Millisecond})
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.ErrorIs(t, err, ErrAttemptTimeout)
	assert.Equal(t, timeoutReading{netError: true, osTimeout: true}, readTimeout(err), "%v", err)
	gaveUp(t, err, ReasonExhausted, 0)
}

// An attempt timeout's error names the base's own error at the timeout, and
// unwraps to it as to ErrAttemptTimeout; a base that reports the timeout
// itself is not named twice.
func TestAttemptTimeoutErrorNamesTheBasesError(t *testing.T) {
	errAbandoned := errors.New("base: connection abandoned")
	for name, tc := range map[string]struct {
		fail func(ctx context.Context) error
		want string
	}{
		"its own error": {func(context.Context) error { return errAbandoned },
			"retryhttp: attempt timeout (1s): base: connection abandoned"},
		"the timeout": {context.Cause, "retryhttp: attempt timeout (1s)"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
					<-req.Context().Done()
					return nil, tc.fail(req.Context())
				}}
				tr, _ := fakeTransport(base, Policy{MaxAttempts: 1, AttemptTimeout: time.Second}, 0)
				_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.ErrorIs(t, err, ErrAttemptTimeout)
				assert.Equal(t, tc.want, e.Err.Error())
				if tc.want != "retryhttp: attempt timeout (1s)" {
					assert.ErrorIs(t, err, errAbandoned)
				}
			})
		})
	}
}

// A failure of the attempt's own under AttemptTimeout, before the timeout
// (a reset), is that failure, not an attempt timeout.
func TestAnAttemptsOwnFailureIsNoAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ResetByPeer}
		tr, _ := fakeTransport(base, Policy{MaxAttempts: 2, AttemptTimeout: time.Second, Backoff: Constant(0)}, 0)
		_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.ErrorIs(t, err, syscall.ECONNRESET)
		assert.NotErrorIs(t, err, ErrAttemptTimeout)
	})
}
