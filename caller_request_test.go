package retryhttp

// The caller's request is never touched: a retry's request is a copy of its
// own, which PrepareRetry may change, header and URL, for that attempt
// alone; only a first attempt may go out as the caller's request itself.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// signedAgain makes tr's PrepareRetry sign each retry again in its query
// (sig=2), and returns the caller's request, signed sig=1.
func signedAgain(t *testing.T, tr *Transport) *http.Request {
	tr.PrepareRetry = func(r *http.Request) error {
		r.URL.RawQuery = "sig=2"
		return nil
	}
	return testutil.NewRequest(t, http.MethodGet, "http://api.test/doc?sig=1", nil).WithContext(t.Context())
}

// A hook that signs the retry again in its query changes the retry's URL,
// not the caller's: the caller's request still reads sig=1, and so does
// the first attempt's.
func TestPrepareRetryChangesTheRetrysURLAlone(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable, http.StatusOK)}
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
	req := signedAgain(t, tr)

	sendOK(t, tr, req)
	require.Equal(t, 2, base.Attempts())
	assert.Equal(t, "sig=1", req.URL.RawQuery, "the caller's request is untouched")
	assert.Equal(t, "sig=1", base.Request(1).URL.RawQuery)
	assert.Equal(t, "sig=2", base.Request(2).URL.RawQuery)
}

// Under hedging the hook runs while the first attempt is still in the base:
// the hedge's URL is its own, so the first attempt reads its URL unchanged
// (and the race detector sees no write to what it reads). The first
// attempt, which lost, ends after RoundTrip returned.
func TestPrepareRetryOfAHedgeLeavesTheFirstAttemptsURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var firstSaw string
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				<-req.Context().Done() // the hedge goes meanwhile, wins, and cancels it
				firstSaw = req.URL.String()
				return nil, req.Context().Err()
			}
			return testutil.Response(req, http.StatusOK, nil, "hedge"), nil
		}}
		tr := &Transport{Base: base, Policy: Policy{Hedge: &Hedge{After: 100 * time.Millisecond}}}
		req := signedAgain(t, tr)

		_, body := sendOK(t, tr, req)
		assert.Equal(t, "hedge", body)
		synctest.Wait() // the first attempt's end
		assert.Equal(t, "http://api.test/doc?sig=1", firstSaw)
		assert.Equal(t, "sig=1", req.URL.RawQuery, "the caller's request is untouched")
		assert.Equal(t, "sig=2", base.Request(2).URL.RawQuery)
	})
}

// A hand-built request without a Header gets one for PrepareRetry to set
// fields in; the caller's stays nil.
func TestPrepareRetryGetsAHeaderForARequestBuiltWithout(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable, http.StatusOK)}
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
	tr.PrepareRetry = func(r *http.Request) error {
		r.Header.Set("Authorization", "Bearer fresh")
		return nil
	}
	u, err := url.Parse("http://api.test/doc")
	require.NoError(t, err)
	req := &http.Request{Method: http.MethodGet, URL: u}

	sendOK(t, tr, req)
	require.Equal(t, 2, base.Attempts())
	assert.Equal(t, "Bearer fresh", base.Request(2).Header.Get("Authorization"))
	assert.Nil(t, req.Header, "the caller's request is untouched")
}

// TestCallerRequestUntouched sends requests down every path a call can take
// and checks afterwards that the caller's request is as it was (header map,
// URL, method, length, body field), that its body was closed, and that a
// response never comes with an error.
func TestCallerRequestUntouched(t *testing.T) {
	payload := bytes.Repeat([]byte("p"), 1000)
	big := bytes.Repeat([]byte("b"), defaultMaxBufferedBody+1)

	type reqBody int
	const (
		noBody      reqBody = iota
		withGetBody         // http.NewRequest over a bytes.Reader
		buffered            // known length, no GetBody
		tooBig              // known length over the buffering bound
		unknownLen          // a stream of unknown length
		short               // ContentLength promises more than the body holds
	)

	cases := []struct {
		name     string
		method   string
		body     reqBody
		statuses []int  // of a script server; nil: see target
		target   string // "refused", "tls", "reset"; "" for the script server
		policy   Policy
		ctx      func() context.Context
		wantResp bool
	}{
		{name: "GET 200 first try", method: "GET", statuses: []int{200}, wantResp: true},
		{name: "PUT GetBody 503 then 200", method: "PUT", body: withGetBody, statuses: []int{503, 200}, wantResp: true},
		{name: "PUT buffered 503 exhausted", method: "PUT", body: buffered, statuses: []int{503}, wantResp: true},
		{name: "PUT buffered 400 not retried", method: "PUT", body: buffered, statuses: []int{400}, wantResp: true},
		{name: "PUT too big 503 not retried", method: "PUT", body: tooBig, statuses: []int{503}, wantResp: true},
		{name: "POST stream 503 not retried", method: "POST", body: unknownLen, statuses: []int{503}, wantResp: true},
		{name: "POST keys added 503 then 200", method: "POST", body: withGetBody, statuses: []int{503, 200},
			policy: Policy{IdempotencyKeys: &IdempotencyKeys{}}, wantResp: true},
		{name: "PUT single attempt policy", method: "PUT", body: buffered, statuses: []int{503},
			policy: Policy{MaxAttempts: 1}, wantResp: true},
		{name: "PUT GetBody refused", method: "PUT", body: withGetBody, target: "refused"},
		{name: "PUT buffered refused", method: "PUT", body: buffered, target: "refused"},
		{name: "POST stream refused", method: "POST", body: unknownLen, target: "refused"},
		{name: "PUT GetBody reset", method: "PUT", body: withGetBody, target: "reset"},
		{name: "PUT stream reset", method: "PUT", body: unknownLen, target: "reset"},
		{name: "PUT buffered bad certificate", method: "PUT", body: buffered, target: "tls"},
		{name: "PUT short body", method: "PUT", body: short, statuses: []int{200}},
		{name: "PUT GetBody caller canceled", method: "PUT", body: withGetBody, statuses: []int{200},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var target string
			switch tc.target {
			case "":
				target = testutil.NewServer(t, testutil.Answers(tc.statuses...)...).URL + "/path?q=1"
			case "refused":
				target = "http://" + testutil.ClosedAddr(t) + "/path?q=1"
			case "reset":
				target = testutil.NewServer(t, retryhttptest.Reset()).URL + "/path?q=1"
			case "tls":
				target = testutil.NewTLSServer(t).URL + "/path?q=1"
			}
			tr := newTestTransport(t, tc.policy)

			req := testutil.NewRequest(t, tc.method, target, nil)
			rec := testutil.NewCloseRecorder(nil)
			switch tc.body {
			case withGetBody:
				req = testutil.NewRequest(t, tc.method, target, bytes.NewReader(payload))
				rec.Reader = req.Body
				req.Body = rec
			case buffered:
				rec.Reader = bytes.NewReader(payload)
				req.Body, req.ContentLength = rec, int64(len(payload))
			case tooBig:
				rec.Reader = bytes.NewReader(big)
				req.Body, req.ContentLength = rec, int64(len(big))
			case unknownLen:
				rec.Reader = io.MultiReader(bytes.NewReader(payload))
				req.Body, req.ContentLength = rec, -1
			case short:
				rec.Reader = bytes.NewReader(payload[:10])
				req.Body, req.ContentLength = rec, int64(len(payload))
			}
			if tc.ctx != nil {
				req = req.WithContext(tc.ctx())
			}
			req.Header.Set("X-Caller", "mine")
			wantHeader := req.Header.Clone()
			wantURL := *req.URL
			wantBody := req.Body
			wantLen := req.ContentLength

			resp, err := testutil.RoundTrip(t, tr, req)

			if tc.wantResp {
				require.NoError(t, err)
				require.NotNil(t, resp)
			} else {
				require.Error(t, err)
			}
			assert.Equal(t, wantHeader, req.Header, "caller's header map")
			assert.Equal(t, wantURL, *req.URL, "caller's URL")
			assert.Equal(t, tc.method, req.Method)
			assert.Equal(t, wantLen, req.ContentLength)
			assert.True(t, wantBody == req.Body, "caller's Body field replaced")
			if tc.body != noBody {
				assert.True(t, rec.WaitClosed(), "caller's body closed")
			}
		})
	}
}

// The first attempt of a bodiless idempotent request under a policy of
// retries alone is the caller's own request; what it answers is judged as
// any attempt's: a 409 to a request with a key is retried, a 200 is not.
func TestAPlainFirstAttemptIsTheCallersRequest(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(409, 200)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	req := testutil.Get(t, t.Context())
	req.Header.Set(defaultKeyHeader, "k-9")
	resp, _ := sendOK(t, tr, req)
	assert.Equal(t, 2, Attempts(resp), "the keyed 409 was retried")
	assert.Same(t, req, base.Request(1), "the first attempt was the caller's request itself")
	assert.EqualValues(t, 2, tr.Stats().Attempts)

	resp, _ = getOK(t, tr)
	assert.Equal(t, 1, Attempts(resp))
	s := tr.Stats()
	assert.EqualValues(t, 2, s.Requests)
	assert.EqualValues(t, 3, s.Attempts)
}

// Each retry sends a copy of the caller's request of its own, carrying its
// attempt's number, which it keeps after the retry is over.
func TestEachRetryIsACopyOfItsOwn(t *testing.T) {
	base, nums := attemptNumbers(t, 503, 503, 503, 200)
	assert.Equal(t, []int{1, 2, 3, 4}, nums)
	for i := 1; i < 4; i++ {
		assert.NotSame(t, base.Request(i), base.Request(i+1), "attempt %d is a copy of its own", i+1)
		assert.Equal(t, i+1, AttemptNumber(base.Request(i+1).Context()), "and keeps its number")
	}
}
