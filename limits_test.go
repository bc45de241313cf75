package retryhttp_test

// Huge configuration values cost no more than sensible ones: no spin, no
// lost body, no crash.

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// With MaxAttempts math.MaxInt, a retry that waits for the budget (here it
// has no credit) sizes the request's backoff schedule with a few Backoff
// calls, not one for each attempt left: the request ends with the caller's
// context, a second later, with a deadline or without one.
func TestHugeMaxAttemptsWaitsForTheBudgetWithFewBackoffCalls(t *testing.T) {
	for _, deadline := range []bool{true, false} {
		name := map[bool]string{true: "deadline", false: "canceled"}[deadline]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int64
				backoff := retryhttp.BackoffFunc(func(int, time.Duration, float64) time.Duration {
					if n := calls.Add(1); n > 1000 {
						t.Fatalf("the Backoff was asked %d times", n)
					}
					return 100 * time.Millisecond
				})
				tr := &retryhttp.Transport{Base: &script{answer: reset}, Budget: retryhttp.NewBudget(0, 0),
					Policy: retryhttp.Policy{MaxAttempts: math.MaxInt, Backoff: backoff}}
				ctx, cancel := context.WithCancel(t.Context())
				if deadline {
					ctx, cancel = context.WithTimeout(t.Context(), time.Second)
				} else {
					time.AfterFunc(time.Second, cancel)
				}
				defer cancel()
				start := time.Now()

				resp, err := tr.RoundTrip(get(t, ctx, "http://api.test/"))

				assert.Nil(t, resp)
				require.Error(t, err)
				assert.Equal(t, time.Second, time.Since(start))
				assert.Less(t, calls.Load(), int64(100), "Backoff calls")
				assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
			})
		})
	}
}
