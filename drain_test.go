package retryhttp

// A failed attempt's response body is drained and closed before the retry,
// so that its connection carries the next attempt: closed exactly once,
// also when it stalls and the drain cuts it off, and cut off in time for
// the retry.

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/respbody"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// stallsThenOK answers the first call with a 503 whose body stalls, which
// it records, and every later call with 200 "ok".
func stallsThenOK(stalled **testutil.CloseRecorder) func(int, *http.Request) (*http.Response, error) {
	return func(n int, req *http.Request) (*http.Response, error) {
		if n > 1 {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		resp := testutil.Response(req, http.StatusServiceUnavailable, nil, "")
		*stalled = testutil.NewStalledBody()
		resp.Body, resp.ContentLength = *stalled, -1
		return resp, nil
	}
}

// The drain of a stalled 503 body is cut off by closing it; it is not
// closed again after.
func TestAStalledFailedBodyIsClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalled *testutil.CloseRecorder
		base := &testutil.Base{Answer: stallsThenOK(&stalled)}
		tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(100 * time.Millisecond)}}

		_, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
		synctest.Wait()
		assert.Equal(t, 1, stalled.Closes(), "Close calls")
	})
}

// The same while the retry waits for the budget (its credit spent, another
// request to the host in flight): the body that stalls as it is kept is
// lost, closed once, and not drained and closed again when the retry is
// let go.
func TestAStalledBodyKeptForTheBudgetIsClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalled *testutil.CloseRecorder
		answer := stallsThenOK(&stalled)
		var n atomic.Int32
		held := make(chan struct{})
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/held" {
				<-held
				return testutil.Response(req, http.StatusOK, nil, "ok"), nil
			}
			return answer(int(n.Add(1)), req)
		}}
		tr := &Transport{Base: base, Budget: NewBudget(0, 0),
			Policy: Policy{Backoff: Constant(time.Second)}}
		var wg sync.WaitGroup
		wg.Go(func() {
			resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://api.test/held", nil).WithContext(t.Context()))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		synctest.Wait() // the other request is in flight

		_, body := getOK(t, tr)
		assert.Equal(t, "ok", body)
		close(held)
		wg.Wait()
		assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
		assert.Equal(t, 1, stalled.Closes(), "Close calls")
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
				_, body := getOK(t, tr)
				assert.Equal(t, "ok", body)
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
		ctx := testutil.WithTimeout(t, 2500*time.Millisecond)
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

// TestFailedAttemptsReuseTheConnection proves that a failed attempt's body is
// drained and closed before the next attempt: 3 attempts, 1 connection.
// net/http drops the connection of a response body closed before its end, so
// without the drain each retry would dial anew.
func TestFailedAttemptsReuseTheConnection(t *testing.T) {
	big := strings.Repeat("x", 16<<10) // more than net/http drains on its own
	s := testutil.NewServer(t,
		retryhttptest.Status(503).WithBody(big),
		retryhttptest.Status(503).WithBody(big),
		retryhttptest.Status(200).WithBody("ok"))
	tr := newTestTransport(t, Policy{MaxAttempts: 3})

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))

	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", testutil.ReadBody(t, resp))
	assert.Len(t, s.Requests(), 3)
	assert.Equal(t, 1, s.Conns(), "new connections across 3 attempts")
}

// stallsUntil answers the first attempt with a 503 whose body sends
// nothing until end says it ends (see ctxStall and closeStall), and every
// later attempt with 200 "ok".
func stallsUntil(end func(req *http.Request, closed <-chan struct{}) <-chan struct{}) *testutil.Base {
	return &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n > 1 {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		b := &endingBody{closed: make(chan struct{})}
		b.end = end(req, b.closed)
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{},
			Body: b, ContentLength: -1, Request: req}, nil
	}}
}

// endingBody sends nothing until end is closed, and then fails.
type endingBody struct {
	end       <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (b *endingBody) Read([]byte) (int, error) {
	<-b.end
	return 0, io.ErrUnexpectedEOF
}

func (b *endingBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

// ctxStall ends the body with the request's context, as net/http's does,
// or with its Close.
func ctxStall(req *http.Request, closed <-chan struct{}) <-chan struct{} {
	end := make(chan struct{})
	go func() {
		select {
		case <-req.Context().Done():
		case <-closed:
		}
		close(end)
	}()
	return end
}

// closeStall ends the body with its Close alone: it ignores every context.
func closeStall(_ *http.Request, closed <-chan struct{}) <-chan struct{} { return closed }

// A failed answer's body that stalls until the request's context ends (as
// net/http's does), 10 ms of backoff and a 40 ms deadline: the drain is cut
// off when the retry is due, not respbody.MinTime later, so the retry that
// OnRetry announced at 10 ms goes then and is served, instead of the
// request ending at its deadline with its 503 lost.
func TestADrainNeverHoldsTheRetryPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := stallsUntil(ctxStall)
		tr, ev := fakeTransport(base, Policy{Backoff: Constant(10 * time.Millisecond)}, 0)
		ctx := testutil.WithTimeout(t, 40*time.Millisecond)
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err, "the retry was sent before the deadline")
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		assert.Equal(t, 10*time.Millisecond, base.Gap(t, 1), "the retry went when OnRetry said")
		assert.Equal(t, 10*time.Millisecond, time.Since(start))
		require.Len(t, ev.retries, 1)
		assert.Equal(t, 10*time.Millisecond, ev.retries[0].Delay)
	})
}

// A failed answer's body that ignores every context and ends only when
// closed, under an AttemptTimeout (whose context the cut-off cancels): the
// drain closes it at its cut-off rather than waiting on it, and the retry
// goes then, well inside the 2 s deadline.
func TestADrainClosesABodyThatIgnoresContexts(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Second} {
		t.Run("AttemptTimeout "+timeout.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := stallsUntil(closeStall)
				tr, _ := fakeTransport(base, Policy{AttemptTimeout: timeout, Backoff: Constant(10 * time.Millisecond)}, 0)
				ctx := testutil.WithTimeout(t, 2*time.Second)
				start := time.Now()
				resp, err := tr.RoundTrip(testutil.Get(t, ctx))
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp))
				assert.Equal(t, respbody.MinTime, time.Since(start), "cut off after respbody.MinTime")
			})
		})
	}
}

// A failed answer's body that ignores every context, read in RoundTrip's
// time by a Retryable's Peek or by BufferResponse: the read ends at the
// caller's deadline, RoundTrip returns then, and the body is closed once.
func TestAReadOfABodyThatIgnoresContextsEndsByTheDeadline(t *testing.T) {
	peek := func(a *Attempt) bool {
		a.Peek(0)
		return a.Retry
	}
	for name, p := range map[string]Policy{
		"Peek":           {Retryable: peek},
		"BufferResponse": {BufferResponse: 1 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := stallsUntil(closeStall)
				tr, _ := fakeTransport(base, p, 0)
				ctx := testutil.WithTimeout(t, 2*time.Second)
				start := time.Now()
				resp, err := tr.RoundTrip(testutil.Get(t, ctx))
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Equal(t, 2*time.Second, time.Since(start), "ended at the deadline")
			})
		})
	}
}
