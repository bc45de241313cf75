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
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A Transport that gives up before the deadline, because the next wait
// would end past it, reports the deadline as the caller's context would
// have at the deadline: errors.Is(err, context.DeadlineExceeded) and a
// timeout, directly and through an http.Client, while the context is not
// done yet. Cancellation is not a deadline.
func TestGivingUpBeforeTheDeadlineIsTheDeadlinesError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &retryhttp.Transport{Base: &testutil.Base{Answer: testutil.ResetByPeer}, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()

		_, err := client.Do(testutil.Get(t, ctx))

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
		tr := &retryhttp.Transport{Base: &testutil.Base{Answer: testutil.ResetByPeer}, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)

		_, err := tr.RoundTrip(testutil.Get(t, ctx))

		var e *retryhttp.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retryhttp.ReasonCanceled, e.Reason)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, e.Timeout())
	})
}
