package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A GET answered 503 with Retry-After: 2, then cut by a reset, then 200,
// each after 100 ms: the timeline says when each attempt went, how long it
// took, what came back, and the wait before it and what set it, exactly.
func TestTimelineTellsEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			time.Sleep(100 * time.Millisecond)
			switch n {
			case 1:
				return testutil.Response(req, 503, http.Header{"Retry-After": {"2"}}, "busy"), nil
			case 2:
				return nil, testutil.ErrReset()
			}
			return testutil.Response(req, 200, nil, "ok"), nil
		}}
		tr, _ := fakeTransport(base, Policy{Timeline: true, Backoff: Constant(time.Second)}, 0)
		t0 := time.Now()
		resp, body := getOK(t, tr)
		assert.Equal(t, "ok", body)

		tl := Timeline(resp, nil)
		require.Len(t, tl, 3)
		want := []struct {
			start, wait time.Duration
			source      string
			status      int
			retry       bool
		}{
			{0, 0, "", 503, true},
			{2100 * time.Millisecond, 2 * time.Second, "Retry-After", 0, true}, // no jitter: u = 0
			{3200 * time.Millisecond, time.Second, "backoff", 200, false},
		}
		for i, w := range want {
			a := tl[i]
			assert.Equal(t, i+1, a.Number)
			assert.Equal(t, t0.Add(w.start), a.Start, "attempt %d", a.Number)
			assert.Equal(t, 100*time.Millisecond, a.Duration, "attempt %d", a.Number)
			assert.Equal(t, w.wait, a.Wait, "attempt %d", a.Number)
			assert.Equal(t, w.source, a.Source, "attempt %d", a.Number)
			assert.Equal(t, w.retry, a.Retry, "attempt %d", a.Number)
			assert.False(t, a.Hedge)
			if w.status == 0 {
				assert.ErrorIs(t, a.Err, syscall.ECONNRESET)
				assert.Nil(t, a.Response)
			} else {
				require.NotNil(t, a.Response)
				assert.Equal(t, w.status, a.Response.StatusCode)
			}
			assert.Equal(t, base.Calls()[i], a.Start, "the wire's time")
		}
		assert.Same(t, resp, tl[2].Response)
		assert.Equal(t, "attempt 1: 100ms, 503", tl[0].String())
		assert.Equal(t, "attempt 2 after 2s of Retry-After: 100ms, "+
			"read tcp: read: connection reset by peer", tl[1].String())
	})
}

// A keyed POST that fails three ways gives up with an *Error whose
// timeline has the key on every attempt, and through which errors.Is and
// errors.As reach every attempt's error, the last's first.
func TestAnErrorReachesEveryAttemptsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			switch n {
			case 1:
				return nil, testutil.ErrRefused()
			case 2:
				return nil, testutil.ErrReset()
			}
			return nil, context.DeadlineExceeded // a timeout of the base's own
		}}
		tr, _ := fakeTransport(base, Policy{Timeline: true, MaxAttempts: 3, Backoff: Constant(time.Second),
			IdempotencyKeys: &IdempotencyKeys{}}, 0)
		_, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodPost, "http://api.test/pay", nil))
		e := gaveUp(t, err, ReasonExhausted, 3)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the first attempt's")
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the second's")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the last's")
		var errno syscall.Errno
		require.ErrorAs(t, err, &errno)
		assert.Equal(t, syscall.ECONNRESET, errno, "the latest found first")

		tl := Timeline(nil, err)
		require.Len(t, tl, 3)
		for i, a := range tl {
			assert.Equal(t, e.Key, a.Key)
			assert.NotEmpty(t, a.Key)
			assert.Equal(t, base.Requests()[i].Header.Get("Idempotency-Key"), a.Key, "the key on the wire")
			assert.Equal(t, e.Err == a.Err, i == 2)
		}
		assert.Equal(t, tl, Timeline(nil, &wrapped{err}), "through wrapping")
	})
}

type wrapped struct{ error }

func (w *wrapped) Unwrap() error { return w.error }

// A hedged GET whose hedge answers first: the timeline shows the hedge, the
// wait before it (the hedge delay, from the first attempt's start), and the
// first attempt canceled as the hedge won.
func TestTimelineOfAHedgedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			time.Sleep(10 * time.Millisecond)
			return testutil.Response(req, 200, nil, "ok"), nil
		}}
		tr, _ := fakeTransport(base, Policy{Timeline: true, Hedge: &Hedge{After: 50 * time.Millisecond, Fraction: 1}}, 0)
		t0 := time.Now()
		resp, _ := getOK(t, tr)
		tl := Timeline(resp, nil)
		require.Len(t, tl, 2)
		assert.Equal(t, Attempt{Request: tl[0].Request, Number: 1, Start: t0, Duration: 60 * time.Millisecond,
			Err: errAttemptCanceled}, tl[0])
		assert.Equal(t, 2, tl[1].Number)
		assert.True(t, tl[1].Hedge)
		assert.Equal(t, "hedge", tl[1].Source)
		assert.Equal(t, 50*time.Millisecond, tl[1].Wait)
		assert.Equal(t, t0.Add(50*time.Millisecond), tl[1].Start)
		assert.Equal(t, 10*time.Millisecond, tl[1].Duration)
		assert.Same(t, resp, tl[1].Response)
	})
}

// A request held by its host's wait (Policy.HostWait) before its first
// attempt: the timeline gives the hold as the first attempt's wait.
func TestTimelineShowsAHostsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return testutil.Response(req, 429, http.Header{"Retry-After": {"3"}}, ""), nil
			}
			return testutil.Response(req, 200, nil, "ok"), nil
		}}
		tr, _ := fakeTransport(base, Policy{Timeline: true, MaxAttempts: 1, HostWait: time.Minute}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		resp, _ = getOK(t, tr) // held 3 s
		tl := Timeline(resp, nil)
		require.Len(t, tl, 1)
		assert.Equal(t, 3*time.Second, tl[0].Wait)
		assert.Equal(t, "HostWait", tl[0].Source)
	})
}

// Without Policy.Timeline, nothing is recorded: Timeline returns nil for a
// response, an error and nothing at all.
func TestNoTimelineUnlessAsked(t *testing.T) {
	base := &testutil.Base{Answer: testutil.OnceThenOK(testutil.ResetByPeer)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	resp, _ := getOK(t, tr)
	assert.Nil(t, Timeline(resp, nil))
	assert.Nil(t, Timeline(nil, errors.New("other")))
	assert.Nil(t, Timeline(nil, nil))

	// Asked for one request alone (WithPolicy), the others record nothing.
	ctx := WithPolicy(t.Context(), Policy{Timeline: true})
	resp, _ = sendOK(t, tr, testutil.Get(t, ctx))
	assert.Len(t, Timeline(resp, nil), 1)
}

// A request given up on with its last response (503 after MaxAttempts)
// tells its timeline from that response; one the caller cancels mid-attempt
// tells it from its *Error, the canceled attempt's outcome its error.
func TestTimelineOfARequestGivenUpOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr, _ := fakeTransport(base, Policy{Timeline: true, MaxAttempts: 3, Backoff: Constant(time.Second)}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, ReasonExhausted, StopReason(resp))
		tl := Timeline(resp, nil)
		require.Len(t, tl, 3)
		for _, a := range tl {
			assert.Equal(t, 503, a.Response.StatusCode)
			assert.True(t, a.Retry)
		}
		assert.Same(t, resp, tl[2].Response)

		ctx, cancel := context.WithCancel(t.Context())
		hang := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return nil, testutil.ErrReset()
			}
			time.AfterFunc(300*time.Millisecond, cancel)
			<-req.Context().Done()
			return nil, req.Context().Err()
		}}
		tr, _ = fakeTransport(hang, Policy{Timeline: true, Backoff: Constant(time.Second)}, 0)
		_, err = tr.RoundTrip(testutil.Get(t, ctx))
		gaveUp(t, err, ReasonCanceled, 2)
		tl = Timeline(nil, err)
		require.Len(t, tl, 2)
		assert.ErrorIs(t, tl[0].Err, syscall.ECONNRESET)
		assert.ErrorIs(t, tl[1].Err, context.Canceled)
		assert.Equal(t, 300*time.Millisecond, tl[1].Duration)
	})
}

// A hedged GET whose Retryable takes a second to judge the first attempt's
// 503, which came back after 50 ms, while the hedge's 200 comes back 50 ms
// after it went: each attempt's Duration ends as its outcome came back,
// not when the request's goroutine, held by Retryable, got to it.
func TestTimelineDurationsEndAsOutcomesComeBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			time.Sleep(50 * time.Millisecond)
			if n == 1 {
				return testutil.Response(req, 503, nil, "busy"), nil
			}
			return testutil.Response(req, 200, nil, "ok"), nil
		}}
		tr, _ := fakeTransport(base, Policy{Timeline: true, Hedge: &Hedge{After: 10 * time.Millisecond, Fraction: 1},
			Retryable: func(a *Attempt) bool {
				if a.Number == 1 {
					time.Sleep(time.Second) // a slow judgment, as of a body peeked at that stalls
				}
				return a.Retry
			}}, 0)
		resp, _ := getOK(t, tr)
		tl := Timeline(resp, nil)
		require.Len(t, tl, 2)
		assert.Equal(t, 503, tl[0].Response.StatusCode)
		assert.Equal(t, 50*time.Millisecond, tl[0].Duration, "the first attempt's, not its judgment's")
		assert.Same(t, resp, tl[1].Response)
		assert.Equal(t, 50*time.Millisecond, tl[1].Duration, "the hedge's, not the time Retryable held the request")
	})
}
