package retryhttp_test

// The caller's request is never touched: a retry's request is a copy that
// PrepareRetry may change, header and URL, for that attempt alone.

import (
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A hook that signs the retry again in its query changes the retry's URL,
// not the caller's: the caller's request still reads sig=1, and so does
// the first attempt's.
func TestPrepareRetryChangesTheRetrysURLAlone(t *testing.T) {
	base := failsOnce()
	tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)}}
	tr.PrepareRetry = func(r *retryhttp.RetryRequest) error {
		r.Request.URL.RawQuery = "sig=2"
		return nil
	}
	req := testutil.NewRequest(t, http.MethodGet, "http://api.test/doc?sig=1", nil).WithContext(t.Context())

	resp, err := tr.RoundTrip(req)

	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	require.Equal(t, 2, base.Attempts())
	assert.Equal(t, "sig=1", req.URL.RawQuery, "the caller's request is untouched")
	assert.Equal(t, "sig=1", base.Request(1).URL.RawQuery)
	assert.Equal(t, "sig=2", base.Request(2).URL.RawQuery)
}

// Under hedging the hook runs while the first attempt is still in the base:
// the hedge's URL is its own, so the first attempt reads its URL unchanged
// (and the race detector sees no write to what it reads).
func TestPrepareRetryOfAHedgeLeavesTheFirstAttemptsURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var firstSaw string
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				time.Sleep(time.Second) // the hedge goes meanwhile, and wins
				firstSaw = req.URL.String()
				return nil, req.Context().Err()
			}
			return testutil.Response(req, http.StatusOK, nil, "hedge"), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Hedge: &retryhttp.Hedge{Delay: 100 * time.Millisecond}}}
		tr.PrepareRetry = func(r *retryhttp.RetryRequest) error {
			r.Request.URL.RawQuery = "sig=2"
			return nil
		}
		req := testutil.NewRequest(t, http.MethodGet, "http://api.test/doc?sig=1", nil).WithContext(t.Context())

		resp, err := tr.RoundTrip(req)

		require.NoError(t, err)
		assert.Equal(t, "hedge", testutil.ReadBody(t, resp))
		assert.Equal(t, "http://api.test/doc?sig=1", firstSaw)
		assert.Equal(t, "sig=1", req.URL.RawQuery, "the caller's request is untouched")
		assert.Equal(t, "sig=2", base.Request(2).URL.RawQuery)
	})
}

// A hand-built request without a Header gets one for PrepareRetry to set
// fields in; the caller's stays nil.
func TestPrepareRetryGetsAHeaderForARequestBuiltWithout(t *testing.T) {
	base := failsOnce()
	tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)}}
	tr.PrepareRetry = func(r *retryhttp.RetryRequest) error {
		r.Request.Header.Set("Authorization", "Bearer fresh")
		return nil
	}
	u, err := url.Parse("http://api.test/doc")
	require.NoError(t, err)
	req := &http.Request{Method: http.MethodGet, URL: u}

	resp, err := tr.RoundTrip(req)

	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	require.Equal(t, 2, base.Attempts())
	assert.Equal(t, "Bearer fresh", base.Request(2).Header.Get("Authorization"))
	assert.Nil(t, req.Header, "the caller's request is untouched")
}

// failsOnce returns a base that answers its first request 503 and every
// later one 200.
func failsOnce() *testutil.Base {
	return &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		code := http.StatusServiceUnavailable
		if n > 1 {
			code = http.StatusOK
		}
		return testutil.Response(req, code, nil, "answer"), nil
	}}
}
