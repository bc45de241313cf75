package retryhttp_test

// No wait ends past the caller's deadline: a retry whose wait would, gives
// up at once, and the error says the deadline ended the request.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// A retry that waited for the budget (it has no credit) is let go at 100 ms
// as a probe, as no news came for 100 ms; its 1 s backoff would then end at
// 1.1 s, past the deadline at 1.05 s: the request gives up at once, at
// 100 ms, with the failed attempt's response if it kept it, else with an
// error.
func TestARetryLetGoByTheBudgetTooLateGivesUpAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(int, *http.Request) (*http.Response, error)
	}{
		{"error", reset},
		{"503", func(_ int, req *http.Request) (*http.Response, error) {
			resp, _ := reply(req, http.StatusServiceUnavailable, "busy")
			return resp, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var reasons []retryhttp.Reason
				tr := &retryhttp.Transport{Base: &script{answer: tc.answer}, Budget: retryhttp.NewBudget(0, 0),
					Policy:   retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)},
					OnGiveUp: func(e *retryhttp.GiveUpEvent) { reasons = append(reasons, e.Reason) }}
				ctx, cancel := context.WithTimeout(t.Context(), 1050*time.Millisecond)
				defer cancel()
				start := time.Now()

				resp, err := tr.RoundTrip(get(t, ctx, "http://api.test/"))

				assert.Equal(t, 100*time.Millisecond, time.Since(start), "given up when let go")
				assert.Equal(t, []retryhttp.Reason{retryhttp.ReasonDeadline}, reasons)
				assert.EqualValues(t, 1, tr.Stats().Attempts)
				if resp != nil {
					require.NoError(t, err)
					assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
					assert.Equal(t, "busy", readAll(t, resp))
					return
				}
				var e *retryhttp.Error
				require.True(t, errors.As(err, &e), "an *Error: %v", err)
				assert.Equal(t, retryhttp.ReasonDeadline, e.Reason)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.True(t, e.Timeout())
			})
		})
	}
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
