package retryhttp_test

// No wait ends past the caller's deadline: a retry whose wait would, gives
// up at once, and the error says the deadline ended the request.

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// A retry that waited for the budget (it has no credit) is let go at 1 s,
// as no news came for a second; its 1 s backoff would then end at 2 s, past
// the deadline at 1.5 s: the request gives up at once, at 1 s, with the
// failed attempt's response if it kept it, else with an error.
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
				ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
				defer cancel()
				start := time.Now()

				resp, err := tr.RoundTrip(get(t, ctx, "http://api.test/"))

				assert.Equal(t, time.Second, time.Since(start), "given up when let go")
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
