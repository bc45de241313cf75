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
)

// stallsThenOK answers the first call with a 503 whose body stalls, which
// it records, and every later call with 200 "ok".
func stallsThenOK(stalled **stalledBody) func(int, *http.Request) (*http.Response, error) {
	return func(n int, req *http.Request) (*http.Response, error) {
		if n > 1 {
			resp, _ := reply(req, http.StatusOK, "ok")
			return resp, nil
		}
		resp, _ := reply(req, http.StatusServiceUnavailable, "")
		*stalled = newStalledBody()
		resp.Body, resp.ContentLength = *stalled, -1
		return resp, nil
	}
}

// The drain of a stalled 503 body is cut off by closing it; it is not
// closed again after.
func TestAStalledFailedBodyIsClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalled *stalledBody
		base := &script{answer: stallsThenOK(&stalled)}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(100 * time.Millisecond)}}

		resp, err := tr.RoundTrip(get(t, t.Context(), "http://api.test/"))

		require.NoError(t, err)
		assert.Equal(t, "ok", readAll(t, resp))
		synctest.Wait()
		assert.Equal(t, int32(1), stalled.closes.Load(), "Close calls")
	})
}

// The same while the retry waits for the budget (its credit spent, another
// request to the host in flight): the body that stalls as it is kept is
// lost, closed once, and not drained and closed again when the retry is
// let go.
func TestAStalledBodyKeptForTheBudgetIsClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stalled *stalledBody
		answer := stallsThenOK(&stalled)
		var n atomic.Int32
		held := make(chan struct{})
		base := &script{answer: func(_ int, req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/held" {
				<-held
				resp, _ := reply(req, http.StatusOK, "ok")
				return resp, nil
			}
			return answer(int(n.Add(1)), req)
		}}
		tr := &retryhttp.Transport{Base: base, Budget: retryhttp.NewBudget(0, 0),
			Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Second)}}
		var wg sync.WaitGroup
		wg.Go(func() {
			resp, err := tr.RoundTrip(get(t, t.Context(), "http://api.test/held"))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		synctest.Wait() // the other request is in flight

		resp, err := tr.RoundTrip(get(t, t.Context(), "http://api.test/"))

		require.NoError(t, err)
		assert.Equal(t, "ok", readAll(t, resp))
		close(held)
		wg.Wait()
		assert.EqualValues(t, 1, tr.Stats().BudgetWaits)
		assert.Equal(t, int32(1), stalled.closes.Load(), "Close calls")
	})
}
