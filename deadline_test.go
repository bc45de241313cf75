package retryhttp_test

// No wait ends past the caller's deadline: a retry whose wait would, gives
// up at once, and the error says the deadline ended the request.

import (
	"context"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// A retry that waits for the budget (it has no credit, and it is the last
// attempt of a request with a deadline, kept for the host's return) is let
// go at 500 ms by another request's success; the server's wait of 1 s (and
// its jitter, under 100 ms), which counts from the release, would then end
// past the deadline at 1.2 s: the request gives up at once, at 500 ms,
// with the failed attempt's response. (A backoff counts from the failure,
// and decide already checked that it ends before the deadline.)
func TestARetryLetGoByTheBudgetTooLateGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := func(_ int, req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/ok" {
				resp, _ := reply(req, http.StatusOK, "ok")
				return resp, nil
			}
			resp, _ := reply(req, http.StatusServiceUnavailable, "busy")
			resp.Header.Set("Retry-After", "1")
			return resp, nil
		}
		var reasons []retryhttp.Reason
		tr := &retryhttp.Transport{Base: &script{answer: answer}, Budget: retryhttp.NewBudget(0, 0),
			Policy:   retryhttp.Policy{MaxAttempts: 2},
			OnGiveUp: func(e *retryhttp.GiveUpEvent) { reasons = append(reasons, e.Reason) }}
		ctx, cancel := context.WithTimeout(t.Context(), 1200*time.Millisecond)
		defer cancel()
		time.AfterFunc(500*time.Millisecond, func() {
			resp, err := tr.RoundTrip(get(t, t.Context(), "http://api.test/ok"))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		start := time.Now()

		resp, err := tr.RoundTrip(get(t, ctx, "http://api.test/"))

		require.NoError(t, err)
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "given up when let go")
		assert.Equal(t, []retryhttp.Reason{retryhttp.ReasonDeadline}, reasons)
		assert.EqualValues(t, 2, tr.Stats().Attempts, "its first attempt and the other request's")
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "busy", readAll(t, resp))
	})
}

// A Transport that gives up before the deadline, because the next wait
// would end past it, reports the deadline as the caller's context would
// have at the deadline: errors.Is(err, context.DeadlineExceeded) and a
// timeout, directly and through an http.Client, while the context is not
// done yet. Cancellation is not a deadline.
func TestGivingUpBeforeTheDeadlineIsTheDeadlinesError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &retryhttp.Transport{Base: &script{answer: reset}, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()

		_, err := client.Do(get(t, ctx, "http://api.test/"))

		assert.Equal(t, time.Second, time.Since(start), "given up before the deadline")
		assert.NoError(t, ctx.Err(), "the context is not done yet")
		var e *retryhttp.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retryhttp.ReasonDeadline, e.Reason)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, e.Timeout())
		assert.True(t, os.IsTimeout(err), "through the client's *url.Error")
	})
	synctest.Test(t, func(t *testing.T) {
		tr := &retryhttp.Transport{Base: &script{answer: reset}, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)

		_, err := tr.RoundTrip(get(t, ctx, "http://api.test/"))

		var e *retryhttp.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retryhttp.ReasonCanceled, e.Reason)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, e.Timeout())
	})
}
