package retryhttp

// Attempts and AttemptNumber give each attempt's number: to the base, from
// its request's context; to the caller, from the response, also for a
// response a hook kept. A request built from a finished attempt's context
// is a request of its own.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// 503 three times, then 200: the failed responses that OnRetry and
// Retryable were given, kept, still read as attempts 1, 2 and 3 once the
// request is over.
func TestAKeptResponseKeepsItsAttemptNumber(t *testing.T) {
	for _, hook := range []string{"OnRetry", "Retryable"} {
		t.Run(hook, func(t *testing.T) {
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				code := http.StatusServiceUnavailable
				if n == 4 {
					code = http.StatusOK
				}
				return testutil.Response(req, code, nil, "answer"), nil
			}}
			var kept []*http.Response
			tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
			switch hook {
			case "OnRetry":
				tr.OnRetry = func(e *RetryEvent) { kept = append(kept, e.Response) }
			case "Retryable":
				tr.Policy.Retryable = func(a *Attempt) bool {
					if a.Response.StatusCode != http.StatusOK {
						kept = append(kept, a.Response)
					}
					return a.Retry
				}
			}

			resp, _ := getOK(t, tr)
			assert.Equal(t, 4, Attempts(resp))
			require.Len(t, kept, 3)
			for i, r := range kept {
				assert.Equal(t, i+1, Attempts(r), "Attempts of response %d", i+1)
				assert.Equal(t, i+1, AttemptNumber(r.Request.Context()), "AttemptNumber of response %d", i+1)
			}
		})
	}
}

// Attempts counts the attempts even when the base leaves resp.Request nil,
// as test doubles and hand-written transports often do.
func TestAttemptsWithoutResponseRequest(t *testing.T) {
	n := 0
	base := testutil.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		n++
		if r.Body != nil {
			r.Body.Close()
		}
		code := http.StatusServiceUnavailable
		if n == 3 {
			code = http.StatusOK
		}
		return &http.Response{StatusCode: code, Body: http.NoBody}, nil // no Request
	})
	tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Backoff: Constant(0)}}
	req := testutil.NewRequest(t, http.MethodGet, "http://api.example/", nil)
	resp, _ := sendOK(t, tr, req)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 3, Attempts(resp))
	assert.Same(t, req.URL, resp.Request.URL, "the response's request is the caller's")

	n = 2 // the next request succeeds at once
	resp, _ = sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, "http://api.example/", nil))
	assert.Equal(t, 1, Attempts(resp))
	require.NotNil(t, resp.Request, "like http.Transport, the response names its request")
}

// attemptNumbers sends a GET, retried at once, to a base answering the
// given statuses in turn (the last one a success), and returns the base
// and the attempt numbers it read from the contexts of its requests, as
// they came.
func attemptNumbers(t *testing.T, codes ...int) (*testutil.Base, []int) {
	t.Helper()
	var nums []int
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		nums = append(nums, AttemptNumber(req.Context()))
		return testutil.Statuses(codes...)(n, req)
	}}
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
	resp, _ := getOK(t, tr)
	assert.Equal(t, len(codes), Attempts(resp))
	return base, nums
}

// A base reads the number of the attempt it is sending from its context.
func TestAttemptNumberForTheBase(t *testing.T) {
	_, seen := attemptNumbers(t, 503, 503, 200)
	assert.Equal(t, []int{1, 2, 3}, seen)
	assert.Equal(t, 1, AttemptNumber(t.Context()), "no mark: a first attempt")
}

// A request built from a finished attempt's context (the next page of a
// listing) is a request of its own: retried, keyed, budgeted and reported.
func TestNextRequestFromResponseContextIsRetried(t *testing.T) {
	for _, attemptTimeout := range []time.Duration{0, time.Minute} {
		t.Run("attempt timeout "+attemptTimeout.String(), func(t *testing.T) {
			testNextRequestFromResponseContext(t, attemptTimeout)
		})
	}
}

func testNextRequestFromResponseContext(t *testing.T, attemptTimeout time.Duration) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(200)))
	t.Cleanup(srv.Close)
	srv.Route("POST /page1", retryhttptest.Sequence(testutil.Answers(503, 200)...))
	srv.Route("POST /page2", retryhttptest.Sequence(testutil.Answers(503, 503, 200)...))
	var h hookLog
	tr := newTestTransport(t, Policy{
		AttemptTimeout:  attemptTimeout,
		IdempotencyKeys: &IdempotencyKeys{},
	})
	h.watch(tr)
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodPost, srv.URL+"/page1", nil))
	require.NoError(t, err)
	require.Equal(t, 2, Attempts(resp))
	testutil.ReadBody(t, resp) // read to its end and closed: the attempt is released

	next, err := http.NewRequestWithContext(resp.Request.Context(), http.MethodPost, srv.URL+"/page2", nil)
	require.NoError(t, err)
	resp2, err := tr.RoundTrip(next)
	require.NoError(t, err, "the context of the first response is not canceled")
	testutil.ReadBody(t, resp2)
	assert.Equal(t, http.StatusOK, resp2.StatusCode)
	assert.Equal(t, 3, Attempts(resp2))
	assert.Len(t, h.retries, 3, "every retry of both requests reported")

	var keys []string
	for _, r := range srv.Requests() {
		if r.Path == "/page2" {
			keys = append(keys, r.Header.Get(defaultKeyHeader))
		}
	}
	require.Len(t, keys, 3)
	assert.NotEmpty(t, keys[0], "the second request has a key of its own")
	assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys)
	assert.Equal(t, uint64(2), tr.Stats().Requests, "both requests counted")

	// Once more, from the second response, whose first attempt was marked
	// because its context held the first response's mark.
	resp3, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL+"/other", nil).WithContext(resp2.Request.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp3)
	assert.Equal(t, 1, Attempts(resp3), "a first attempt counts 1, whatever its context held")
}

func TestAttemptsReadableFromResponse(t *testing.T) {
	s := testutil.NewServer(t, testutil.Answers(503, 500, 200)...)
	tr := newTestTransport(t, Policy{})

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 3, Attempts(resp))

	resp, err = testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 1, Attempts(resp), "a first-try success")

	assert.Equal(t, 0, Attempts(nil))
}

// A response the Transport gave up on says why beside its attempts
// (StopReason); a response that is no failure says nothing, and the
// caller's request stays as it was.
func TestAResponseSaysWhyRetryingStopped(t *testing.T) {
	wait := http.Header{"Retry-After": {"3600"}}
	for _, tc := range []struct {
		name     string
		max      int
		answer   func(int, *http.Request) (*http.Response, error)
		attempts int
		reason   Reason
	}{
		{"503s until the last attempt", 3, testutil.Statuses(503), 3, ReasonExhausted},
		{"a first 503 asking for too long a wait", 3, withHeader(503, "Retry-After", "3600"), 1, ReasonRetryAfter},
		{"a 503 after a retry asking for too long a wait", 3, func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return testutil.Response(req, 503, nil, ""), nil
			}
			return testutil.Response(req, 503, wait, ""), nil
		}, 2, ReasonRetryAfter},
		{"a 503 with retries off", 1, testutil.Statuses(503), 1, ReasonNoRetries},
		{"a 200 after a 503", 3, testutil.Statuses(503, 200), 2, 0},
		{"a 404", 3, testutil.Statuses(404), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{Base: &testutil.Base{Answer: tc.answer}, Budget: UnlimitedBudget(),
				Policy: Policy{MaxAttempts: tc.max, Backoff: Constant(0)}}
			var gaveUp []Reason
			tr.OnGiveUp = func(e *GiveUpEvent) { gaveUp = append(gaveUp, e.Reason) }
			req := testutil.Get(t, t.Context())
			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, tc.attempts, Attempts(resp))
			assert.Equal(t, tc.reason, StopReason(resp))
			if tc.reason != 0 {
				assert.Equal(t, []Reason{tc.reason}, gaveUp, "as OnGiveUp heard it")
			}
			assert.Nil(t, mark.OfRequest(req), "the caller's request carries no mark")
		})
	}
	assert.Zero(t, StopReason(nil))
}
