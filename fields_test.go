package retryhttp

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A Retryable may set the wait on a failed answer's header (for a server
// known to leave Retry-After out): the header is read again after the hook,
// not from a scan made before it, and the retry waits what it asks.
func TestRetryableMayAddAServerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		p := Policy{Retryable: func(a *Attempt) bool {
			if a.Response != nil && a.Response.StatusCode == http.StatusServiceUnavailable {
				a.Response.Header.Set("Retry-After", "3")
			}
			return a.Retry
		}}
		tr, ev := fakeTransport(base, p, 0)
		start := time.Now()
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		require.Len(t, ev.retries, 1)
		assert.Equal(t, DelayRetryAfter, ev.retries[0].Source)
		assert.Equal(t, 3*time.Second, time.Since(start), "the retry went out after the wait the hook set (jitter 0)")
	})
}
