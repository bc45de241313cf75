package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// PrepareRetry changes each retry's own copy: a fresh token per retry
// reaches the server, and the caller's request keeps its own.
func TestPrepareRetryRefreshesEachRetry(t *testing.T) {
	srv := testutil.NewServer(t, testutil.Answers(401, 503, 200)...)
	tr := newTestTransport(t, Policy{Statuses: []int{401, 503}})
	tokens := 0
	tr.PrepareRetry = func(r *http.Request) error {
		tokens++
		r.Header.Set("Authorization", fmt.Sprintf("Bearer fresh-%d", AttemptNumber(r.Context())))
		return nil
	}
	req := testutil.NewRequest(t, http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer expired")
	sendOK(t, tr, req)
	var seen []string
	for _, r := range srv.Requests() {
		seen = append(seen, r.Header.Get("Authorization"))
	}
	assert.Equal(t, []string{"Bearer expired", "Bearer fresh-2", "Bearer fresh-3"}, seen)
	assert.Equal(t, "Bearer expired", req.Header.Get("Authorization"), "the caller's request untouched")
	assert.Equal(t, 2, tokens)
}

// An error from PrepareRetry ends the request with it; the retry is not
// sent, and its body is closed.
func TestPrepareRetryErrorEndsTheRequest(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr, ev := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	errSigning := errors.New("signing key unavailable")
	tr.PrepareRetry = func(*http.Request) error { return errSigning }
	var bodies []*testutil.CloseRecorder
	req := testutil.NewRequest(t, http.MethodPut, "http://api.test/doc", strings.NewReader("v1"))
	req.GetBody = func() (io.ReadCloser, error) {
		b := testutil.NewCloseRecorder(strings.NewReader("v1"))
		bodies = append(bodies, b)
		return b, nil
	}
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, errSigning)
	gaveUp(t, err, ReasonNotTransient, 1)
	assert.Equal(t, 1, base.Attempts(), "the retry was not sent")
	require.Len(t, bodies, 1)
	assert.Equal(t, 1, bodies[0].Closes())
	assert.Equal(t, []Reason{ReasonNotTransient}, ev.reasons())
	s := tr.Stats()
	assert.EqualValues(t, 1, s.Attempts)
	assert.Zero(t, s.Retries)
}

// net/http sends a replayable request again by itself when a reused
// connection fails before any byte of the response. A Transport counts
// that resend where it watches the attempt: a keyed POST whose key it
// added (the attempt is its own copy). A bodiless GET's attempts are not
// watched (watching would cost the success path): its resend reaches the
// server, and neither Attempts nor Stats.NetHTTPResends counts it, as Stats says.
func TestNetHTTPResendsAreCountedWhereWatched(t *testing.T) {
	cases := []struct {
		name    string
		policy  Policy
		method  string
		body    string
		resends uint64
	}{
		{"keyed POST, watched", Policy{IdempotencyKeys: &IdempotencyKeys{}}, http.MethodPost, "x", 1},
		{"GET, not watched", Policy{}, http.MethodGet, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := testutil.NewServer(t, retryhttptest.Status(200), retryhttptest.Hangup(), retryhttptest.Status(200))
			tr := newTestTransport(t, tc.policy)
			for range 2 {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				resp, _ := sendOK(t, tr, testutil.NewRequest(t, tc.method, srv.URL, body))
				assert.Equal(t, 1, Attempts(resp))
			}
			assert.Len(t, srv.Requests(), 3, "the server saw net/http's resend")
			s := tr.Stats()
			assert.EqualValues(t, 2, s.Attempts)
			assert.Equal(t, tc.resends, s.NetHTTPResends)
		})
	}
}

// Retryable may decide from the body: Peek reads its start, and the caller
// still reads the whole body from its start.
func TestRetryablePeeksAtTheBody(t *testing.T) {
	const busy = `{"error":{"code":"lock_timeout","message":"try again"}}`
	const final = `{"error":{"code":"card_declined"},"padding":"` + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" + `"}`
	srv := testutil.NewServer(t, retryhttptest.Status(400).WithBody(busy), retryhttptest.Status(400).WithBody(final))
	tr := newTestTransport(t, Policy{Retryable: func(a *Attempt) bool {
		head, err := a.Peek(32)
		require.NoError(t, err)
		return a.Retry || strings.Contains(string(head), "lock_timeout")
	}})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, final, testutil.ReadBody(t, resp), "the whole body, from its start")
	assert.Equal(t, 2, Attempts(resp))
}

func TestPeek(t *testing.T) {
	a := &Attempt{Response: &http.Response{Body: testutil.NewCloseRecorder(strings.NewReader("hello, world"))}}
	head, err := a.Peek(5)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(head))
	again, err := a.Peek(0) // defaultPeek: more than the body
	require.NoError(t, err)
	assert.Equal(t, "hello, world", string(again))
	rest, err := io.ReadAll(a.Response.Body)
	require.NoError(t, err)
	assert.Equal(t, "hello, world", string(rest))
	b, err := (&Attempt{}).Peek(10)
	assert.Nil(t, b)
	assert.NoError(t, err)
}

// A PrepareRetry that panics leaves nothing of the retry behind: its
// attempt timeout is stopped and its context canceled, as when the hook
// returns an error. Under a caller's context of a type the context package
// does not know (testutil.OpaqueCtx), a context made from it runs a goroutine until it
// is canceled: none is left. Found by the simulation (internal/sim).
func TestPrepareRetryPanicEndsTheRetrysContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr, _ := fakeTransport(base, Policy{Backoff: Constant(0), AttemptTimeout: time.Hour}, 0)
		tr.PrepareRetry = func(*http.Request) error { panic("hook panicked") }
		panicsLeavingNoContext(t, tr)
		assert.Equal(t, 1, base.Attempts())
	})
}

func TestOnRetryReportsStatusAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503, 429, 200)}
		var events []RetryEvent
		tr := &Transport{Base: base, Budget: UnlimitedBudget(), // the retries' waits, not the budget's line
			Policy: Policy{Backoff: exponential{Base: time.Second, Cap: time.Minute}}}
		tr.OnRetry = func(e *RetryEvent) { events = append(events, *e) }
		req := testutil.NewRequest(t, "GET", "http://example.test/", nil)

		resp, err := testutil.RoundTrip(t, tr, req)

		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		require.Len(t, events, 2)
		for i, want := range []struct {
			status int
			delay  time.Duration
		}{{503, time.Second}, {429, 2 * time.Second}} {
			e := events[i]
			assert.Same(t, req, e.Request)
			assert.Equal(t, i+1, e.Attempt)
			require.NotNil(t, e.Response)
			assert.Equal(t, want.status, e.Response.StatusCode)
			assert.NoError(t, e.Err)
			assert.Equal(t, want.delay, e.Delay)
			assert.Equal(t, "backoff", e.Source)
		}
	})
}

func TestOnRetryReportsError(t *testing.T) {
	var events []RetryEvent
	tr := newTestTransport(t, Policy{MaxAttempts: 3, Backoff: Constant(time.Millisecond)})
	tr.OnRetry = func(e *RetryEvent) { events = append(events, *e) }

	_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://"+testutil.ClosedAddr(t)+"/", nil))

	require.Error(t, err)
	require.Len(t, events, 2)
	for i, e := range events {
		assert.Equal(t, i+1, e.Attempt)
		assert.Nil(t, e.Response)
		assert.ErrorIs(t, e.Err, syscall.ECONNREFUSED)
		assert.Equal(t, time.Millisecond, e.Delay)
	}
}

// TestRetryableHookSeesEachAttempt checks what the user hook is shown: the
// caller's request, the attempt number, the outcome and the default verdict.
func TestRetryableHookSeesEachAttempt(t *testing.T) {
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n == 2 {
			return nil, testutil.ErrRefused()
		}
		return testutil.Statuses(503, 503, 404)(n, req)
	}}
	type seen struct {
		number int
		status int
		err    bool
		retry  bool
	}
	var got []seen
	req := testutil.NewRequest(t, "GET", "http://example.test/", nil)
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0), Retryable: func(a *Attempt) bool {
		assert.Same(t, req, a.Request)
		s := seen{number: a.Number, err: a.Err != nil, retry: a.Retry}
		if a.Response != nil {
			s.status = a.Response.StatusCode
		}
		got = append(got, s)
		return a.Retry
	}}}

	resp, err := testutil.RoundTrip(t, tr, req)

	require.NoError(t, err)
	assert.Equal(t, 404, resp.StatusCode)
	assert.Equal(t, []seen{
		{number: 1, status: 503, retry: true},
		{number: 2, err: true, retry: true},
		{number: 3, status: 404, retry: false},
	}, got)
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
		{name: "Backoff", getBody: true, policy: Policy{Backoff: testutil.BackoffFunc(func(int, time.Duration, float64) time.Duration { boom(); return 0 })}},
		{name: "OnRetry", getBody: true, hooks: func(tr *Transport) { tr.OnRetry = func(*RetryEvent) { boom() } }},
		{name: "OnGiveUp", policy: Policy{MaxAttempts: 1}, hooks: func(tr *Transport) { tr.OnGiveUp = func(*GiveUpEvent) { boom() } }},
		{name: "key generator", policy: Policy{IdempotencyKeys: &IdempotencyKeys{
			Generate: func(*http.Request) (string, error) { boom(); return "", nil }}}},
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

// panicsLeavingNoContext asserts, in a testing/synctest bubble, that a GET
// through tr under a testutil.OpaqueCtx panics with "hook panicked" and leaves no
// goroutine of a context made for its attempts: one made from an OpaqueCtx
// runs until it is canceled.
func panicsLeavingNoContext(t *testing.T, tr *Transport) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := testutil.Get(t, testutil.NewOpaqueCtx(ctx))
	synctest.Wait()
	_, before := testutil.Census()
	assert.PanicsWithValue(t, "hook panicked", func() { tr.RoundTrip(req) })
	synctest.Wait()
	_, after := testutil.Census()
	assert.Len(t, after, len(before), "goroutines of contexts made for the attempts")
}

// A caller whose context ends while OnRetry runs gets no retry, even one
// due at once: the Transport gives up with the context's reason, and
// nothing more is sent.
func TestAContextEndedInOnRetryStopsAnImmediateRetry(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr, _ := fakeTransport(base, Policy{MaxAttempts: 3, Backoff: Constant(0)}, 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tr.OnRetry = func(*RetryEvent) { cancel() }
	_, err := tr.RoundTrip(testutil.Get(t, ctx))
	require.ErrorIs(t, err, context.Canceled)
	gaveUp(t, err, ReasonCanceled, 1)
	assert.Equal(t, 1, base.Attempts(), "nothing sent after the context ended")
}
