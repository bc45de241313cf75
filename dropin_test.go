package retryhttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

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

// An attempt timeout that exhausts the attempts reads as a timeout.
func TestAttemptTimeoutGiveUpReadsAsTimeout(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Hang())
	tr := newTestTransport(t, Policy{MaxAttempts: 2, AttemptTimeout: 20 * time.Millisecond})
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.ErrorIs(t, err, ErrAttemptTimeout)
	assert.Equal(t, timeoutReading{netError: true, osTimeout: true}, readTimeout(err), "%v", err)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, ReasonExhausted, e.Reason)
}

// Attempts counts the attempts even when the base leaves resp.Request nil,
// as test doubles and hand-written transports often do.
func TestAttemptsWithoutResponseRequest(t *testing.T) {
	n := 0
	base := testutil.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if r.Body != nil {
			r.Body.Close()
		}
		code := http.StatusServiceUnavailable
		if n == 3 {
			code = http.StatusOK
		}
		return &http.Response{StatusCode: code, Body: http.NoBody}, nil // no Request
	})
	tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Backoff: Constant(0)}}
	req := testutil.NewRequest(t, http.MethodGet, "http://api.example/", nil)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 3, Attempts(resp))
	assert.Same(t, req.URL, resp.Request.URL, "the response's request is the caller's")

	n = 2 // the next request succeeds at once
	resp, err = tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://api.example/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, Attempts(resp))
	require.NotNil(t, resp.Request, "like http.Transport, the response names its request")
}

// A request built from a finished attempt's context (the next page of a
// listing) is a request of its own: retried, keyed, budgeted and reported.
func TestNextRequestFromResponseContextIsRetried(t *testing.T) {
	for _, attemptTimeout := range []time.Duration{0, time.Minute} {
		t.Run("attempt timeout "+attemptTimeout.String(), func(t *testing.T) {
			testNextRequestFromResponseContext(t, attemptTimeout)
		})
	}
}

func testNextRequestFromResponseContext(t *testing.T, attemptTimeout time.Duration) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(200)))
	t.Cleanup(srv.Close)
	srv.Route("POST /page1", retryhttptest.Sequence(testutil.Answers(503, 200)...))
	srv.Route("POST /page2", retryhttptest.Sequence(testutil.Answers(503, 503, 200)...))
	var h hookLog
	tr := newTestTransport(t, Policy{
		AttemptTimeout:  attemptTimeout,
		IdempotencyKeys: &IdempotencyKeys{},
	})
	h.watch(tr)
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodPost, srv.URL+"/page1", nil))
	require.NoError(t, err)
	require.Equal(t, 2, Attempts(resp))
	testutil.ReadBody(t, resp) // read to its end and closed: the attempt is released

	next, err := http.NewRequestWithContext(resp.Request.Context(), http.MethodPost, srv.URL+"/page2", nil)
	require.NoError(t, err)
	resp2, err := tr.RoundTrip(next)
	require.NoError(t, err, "the context of the first response is not canceled")
	testutil.ReadBody(t, resp2)
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
	assert.Equal(t, 3, Attempts(resp2))
	assert.Len(t, h.retries, 3, "every retry of both requests reported")

	var keys []string
	for _, r := range srv.Requests() {
		if r.Path == "/page2" {
			keys = append(keys, r.Header.Get(defaultKeyHeader))
		}
	}
	require.Len(t, keys, 3)
	assert.NotEmpty(t, keys[0], "the second request has a key of its own")
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys)
	assert.Equal(t, uint64(2), tr.Stats().Requests, "both requests counted")

	// Once more, from the second response, whose first attempt was marked
	// because its context held the first response's mark.
	resp3, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL+"/other", nil).WithContext(resp2.Request.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp3)
	assert.Equal(t, 1, Attempts(resp3), "a first attempt counts 1, whatever its context held")
}

// errors.Is and errors.As still see through an *Error that is a timeout.
func TestTimeoutErrorUnwraps(t *testing.T) {
	e := &Error{Attempts: 2, Reason: ReasonDeadline, Err: io.ErrUnexpectedEOF, ctxErr: context.DeadlineExceeded}
	assert.True(t, e.Timeout())
	assert.True(t, errors.Is(e, context.DeadlineExceeded))
	e = &Error{Attempts: 2, Reason: ReasonCanceled, Err: io.ErrUnexpectedEOF, ctxErr: context.Canceled}
	assert.False(t, e.Timeout())
}

// A hook that panics leaves nothing open: the failed attempt's response
// body, the request body (a stream the Transport holds, or the caller's
// body before anything was sent) and a body made for the next attempt are
// closed, and the panic goes on to the caller.
func TestPanickingHookLeaksNothing(t *testing.T) {
	boom := func() { panic("boom") }
	for _, tc := range []struct {
		name    string
		policy  Policy
		hooks   func(*Transport)
		getBody bool // the request body has GetBody
	}{
		{name: "Retryable", policy: Policy{Retryable: func(*Attempt) bool { boom(); return false }}},
		{name: "Backoff", getBody: true, policy: Policy{Backoff: BackoffFunc(func(int, time.Duration, float64) time.Duration { boom(); return 0 })}},
		{name: "OnRetry", getBody: true, hooks: func(tr *Transport) { tr.OnRetry = func(*RetryEvent) { boom() } }},
		{name: "OnGiveUp", policy: Policy{MaxAttempts: 1}, hooks: func(tr *Transport) { tr.OnGiveUp = func(*GiveUpEvent) { boom() } }},
		{name: "key generator", policy: Policy{IdempotencyKeys: &IdempotencyKeys{
			Generate: func() (string, error) { boom(); return "", nil }}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var respBody *testutil.CloseRecorder
			var retryBodies []*testutil.CloseRecorder
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				respBody = testutil.NewCloseRecorder(strings.NewReader("busy"))
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{},
					Body: respBody, ContentLength: 4, Request: req}, nil
			}}
			p := tc.policy
			if p.Backoff == nil {
				p.Backoff = Constant(0)
			}
			tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: p}
			if tc.hooks != nil {
				tc.hooks(tr)
			}
			reqBody := testutil.NewCloseRecorder(strings.NewReader("payload"))
			req := testutil.NewRequest(t, http.MethodPut, "http://api.test/doc", nil)
			req.Body, req.ContentLength = reqBody, -1 // a stream: no GetBody, length unknown
			if tc.getBody {
				req.ContentLength = 7
				req.GetBody = func() (io.ReadCloser, error) {
					b := testutil.NewCloseRecorder(strings.NewReader("payload"))
					retryBodies = append(retryBodies, b)
					return b, nil
				}
			}
			if tc.name == "key generator" {
				req.Method = http.MethodPost
			}
			require.PanicsWithValue(t, "boom", func() { tr.RoundTrip(req) })
			assert.Equal(t, 1, reqBody.Closes(), "the caller's body closed once")
			if base.Attempts() > 0 {
				require.NotNil(t, respBody)
				assert.Equal(t, 1, respBody.Closes(), "the failed response's body closed")
			}
			if tc.name == "OnRetry" {
				assert.Len(t, retryBodies, 1, "the next attempt's body was made before OnRetry")
			}
			for _, b := range retryBodies {
				assert.Equal(t, 1, b.Closes(), "a body made for the next attempt closed")
			}
		})
	}
}

// A base reads the number of the attempt it is sending from its context.
func TestAttemptNumberForTheBase(t *testing.T) {
	var seen []int
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		seen = append(seen, AttemptNumber(req.Context()))
		if n < 3 {
			return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
		}
		return testutil.Response(req, http.StatusOK, nil, "ok"), nil
	}}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, []int{1, 2, 3}, seen)
	assert.Equal(t, 1, AttemptNumber(t.Context()), "no mark: a first attempt")
}

// A bodiless idempotent request under a policy of retries alone goes out
// as the caller's own request (the fast path); what it answers is judged as
// on any path: a 409 to a request with a key is retried, a 200 is not.
func TestFastPathSendsTheCallersRequest(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(409, 200)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	req := testutil.Get(t, t.Context())
	req.Header.Set(defaultKeyHeader, "k-9")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, 2, Attempts(resp), "the keyed 409 was retried")
	assert.Same(t, req, base.Request(1), "the first attempt was the caller's request itself")
	assert.EqualValues(t, 2, tr.Stats().Attempts)

	resp, err = tr.RoundTrip(testutil.Get(t, t.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, 1, Attempts(resp))
	s := tr.Stats()
	assert.EqualValues(t, 2, s.Requests)
	assert.EqualValues(t, 3, s.Attempts)
}

// Each retry sends a copy of the caller's request of its own, carrying its
// attempt's number, which it keeps after the retry is over.
func TestEachRetryIsACopyOfItsOwn(t *testing.T) {
	var nums []int
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		nums = append(nums, AttemptNumber(req.Context()))
		if n < 4 {
			return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
		}
		return testutil.Response(req, http.StatusOK, nil, "ok"), nil
	}}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, []int{1, 2, 3, 4}, nums)
	assert.Equal(t, 4, Attempts(resp))
	for i := 1; i < 4; i++ {
		assert.NotSame(t, base.Request(i), base.Request(i+1), "attempt %d is a copy of its own", i+1)
		assert.Equal(t, i+1, AttemptNumber(base.Request(i+1).Context()), "and keeps its number")
	}
}
