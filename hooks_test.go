package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	tr.PrepareRetry = func(r *RetryRequest) error {
		tokens++
		r.Request.Header.Set("Authorization", fmt.Sprintf("Bearer fresh-%d", r.Attempt))
		return nil
	}
	req := testutil.NewRequest(t, http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer expired")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
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
	tr.PrepareRetry = func(*RetryRequest) error { return errSigning }
	var bodies []*testutil.CloseRecorder
	req := testutil.NewRequest(t, http.MethodPut, "http://api.test/doc", strings.NewReader("v1"))
	req.GetBody = func() (io.ReadCloser, error) {
		b := testutil.NewCloseRecorder(strings.NewReader("v1"))
		bodies = append(bodies, b)
		return b, nil
	}
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, errSigning)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, ReasonPrepareRetry, e.Reason)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, 1, base.Attempts(), "the retry was not sent")
	require.Len(t, bodies, 1)
	assert.Equal(t, 1, bodies[0].Closes())
	assert.Equal(t, []Reason{ReasonPrepareRetry}, ev.reasons())
	s := tr.Stats()
	assert.EqualValues(t, 1, s.Attempts)
	assert.Zero(t, s.Retries)
}

// net/http sends a replayable request again by itself when a reused
// connection fails before any byte of the response. A Transport counts
// that resend where it watches the attempt: a keyed POST whose key it
// added (the attempt is its own copy). A bodiless GET's attempts are not
// watched (watching would cost the success path): its resend reaches the
// server, and neither Attempts nor Stats.Resends counts it, as Stats says.
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
				resp, err := tr.RoundTrip(testutil.NewRequest(t, tc.method, srv.URL, body))
				require.NoError(t, err)
				testutil.ReadBody(t, resp)
				assert.Equal(t, 1, Attempts(resp))
			}
			assert.Len(t, srv.Requests(), 3, "the server saw net/http's resend")
			s := tr.Stats()
			assert.EqualValues(t, 2, s.Attempts)
			assert.Equal(t, tc.resends, s.Resends)
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
// does not know (opaqueCtx), a context made from it runs a goroutine until it
// is canceled: none is left. Found by the simulation (TestSim).
func TestPrepareRetryPanicEndsTheRetrysContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr, _ := fakeTransport(base, Policy{Backoff: Constant(0), AttemptTimeout: time.Hour}, 0)
		tr.PrepareRetry = func(*RetryRequest) error { panic("hook panicked") }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req := testutil.Get(t, newOpaqueCtx(ctx))
		synctest.Wait()
		_, before := census()
		assert.PanicsWithValue(t, "hook panicked", func() { tr.RoundTrip(req) })
		synctest.Wait()
		_, after := census()
		assert.Equal(t, 1, base.Attempts())
		assert.Len(t, after, len(before), "goroutines of contexts made for the attempts")
	})
}
