package retryhttp_test

// A failed attempt's response body is drained and closed before the retry:
// closed exactly once, also when it stalls and the drain cuts it off.

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
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
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(100 * time.Millisecond)}}

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
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
		tr := &retryhttp.Transport{Base: base, Budget: retryhttp.NewBudget(0, 0),
			Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		var wg sync.WaitGroup
		wg.Go(func() {
			resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://api.test/held", nil).WithContext(t.Context()))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		synctest.Wait() // the other request is in flight

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "ok", testutil.ReadBody(t, resp))
		close(held)
		wg.Wait()
		assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
		assert.Equal(t, 1, stalled.Closes(), "Close calls")
	})
}
