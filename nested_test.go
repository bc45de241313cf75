package retryhttp

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// nestedServer starts a loopback server that answers every request with
// 503.
func nestedServer(t *testing.T) *retryhttptest.Server {
	t.Helper()
	return testutil.NewServer(t, retryhttptest.Status(http.StatusServiceUnavailable))
}

// nestedLayer is a retrying Transport of 3 attempts with no wait between
// them, recording the reasons it gives up for.
type nestedLayer struct {
	*Transport
	reasons []Reason
}

func newNestedLayer(base http.RoundTripper) *nestedLayer {
	l := &nestedLayer{}
	l.Transport = &Transport{
		Base:     base,
		Budget:   UnlimitedBudget(), // the layers, not the budget (see budget_test.go)
		Policy:   Policy{MaxAttempts: 3, Backoff: Constant(0)},
		OnGiveUp: func(e *GiveUpEvent) { l.reasons = append(l.reasons, e.Reason) },
	}
	return l
}

func nestedGet(t *testing.T, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	client := &http.Client{Transport: rt}
	resp, err := client.Get(url)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

func TestTransportAsBaseOfAnotherDoesNotMultiplyAttempts(t *testing.T) {
	srv := nestedServer(t)
	inner := newNestedLayer(srv.Client().Transport)
	outer := newNestedLayer(inner)

	resp, err := nestedGet(t, outer, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Len(t, srv.Requests(), 3, "3 attempts, not 3 x 3")
	assert.Equal(t, 3, Attempts(resp))

	assert.Equal(t, []Reason{ReasonExhausted}, inner.reasons)
	assert.Equal(t, []Reason{ReasonNoRetries}, outer.reasons, "the outer layer does not retry what the inner one retried")
	assert.Equal(t, Stats{Requests: 1, Attempts: 3, Retries: 2, GiveUps: map[Reason]uint64{ReasonExhausted: 1}}, inner.Stats())
	assert.Equal(t, Stats{Requests: 1, Attempts: 1, GiveUps: map[Reason]uint64{ReasonNoRetries: 1}}, outer.Stats())
}

func TestThreeLayersMakeOneLayerOfAttempts(t *testing.T) {
	srv := nestedServer(t)
	top := newNestedLayer(newNestedLayer(newNestedLayer(srv.Client().Transport)))
	resp, err := nestedGet(t, top, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Len(t, srv.Requests(), 3, "3 attempts, not 27")
}

func TestInnerTransportErrorIsNotRetriedAgain(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Hangup()) // no response: the client reads EOF
	inner := newNestedLayer(srv.Client().Transport)
	outer := newNestedLayer(inner)

	_, err := nestedGet(t, outer, srv.URL)
	gaveUp(t, err, ReasonNoRetries, 0)
	assert.Len(t, srv.Requests(), 3)
	assert.Equal(t, []Reason{ReasonExhausted}, inner.reasons)
	assert.Equal(t, []Reason{ReasonNoRetries}, outer.reasons)
}

// sdk stands for a library with its own retrying client, called inside the
// attempts of a user's client: it makes its own request to its service
// with the context of the request it serves.
type sdk struct {
	client *http.Client
	url    string
	fail   atomic.Int64 // calls to fail with a refused connection before the service is asked
}

func (s *sdk) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.fail.Add(-1) >= 0 {
		return nil, testutil.ErrRefused()
	}
	inner, err := http.NewRequestWithContext(req.Context(), http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	return s.client.Do(inner)
}

func TestSDKClientInsideAnAttemptDoesNotMultiplyAttempts(t *testing.T) {
	t.Run("the inner client retries, the outer does not", func(t *testing.T) {
		srv := nestedServer(t)
		inner := newNestedLayer(srv.Client().Transport)
		outer := newNestedLayer(&sdk{client: &http.Client{Transport: inner}, url: srv.URL})

		resp, err := nestedGet(t, outer, "http://user.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Len(t, srv.Requests(), 3, "3 attempts, not 3 x 3")
		assert.Equal(t, []Reason{ReasonNoRetries}, outer.reasons)
	})
	t.Run("inside a marked attempt the inner client sends once", func(t *testing.T) {
		srv := nestedServer(t)
		inner := newNestedLayer(srv.Client().Transport)
		s := &sdk{client: &http.Client{Transport: inner}, url: srv.URL}
		s.fail.Store(1) // the first attempt fails before the SDK is reached
		outer := newNestedLayer(s)

		resp, err := nestedGet(t, outer, "http://user.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 3, Attempts(resp))
		assert.Len(t, srv.Requests(), 2, "the outer's attempts 2 and 3, one request each")
		assert.Equal(t, Stats{Requests: 2, Attempts: 2, GiveUps: map[Reason]uint64{}}, inner.Stats())
		assert.Equal(t, []Reason{ReasonExhausted}, outer.reasons)
	})
	t.Run("every attempt marked: one request per outer attempt", func(t *testing.T) {
		srv := nestedServer(t)
		inner := newNestedLayer(srv.Client().Transport)
		outer := newNestedLayer(&sdk{client: &http.Client{Transport: inner}, url: srv.URL})
		outer.Policy.AttemptTimeout = time.Minute // marks the first attempt too

		resp, err := nestedGet(t, outer, "http://user.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Len(t, srv.Requests(), 3)
		assert.Zero(t, inner.Stats().Retries)
		assert.Equal(t, []Reason{ReasonExhausted}, outer.reasons)
	})
}

// TestInnerThatDidNotRetryLeavesRetryingToTheOuter: an inner Transport
// that made one attempt (no retries in its policy) does not stop the
// outer from retrying.
func TestInnerThatDidNotRetryLeavesRetryingToTheOuter(t *testing.T) {
	for name, configure := range map[string]func(*Transport){
		"one attempt": func(tr *Transport) { tr.Policy.MaxAttempts = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			srv := nestedServer(t)
			inner := newNestedLayer(srv.Client().Transport)
			configure(inner.Transport)
			outer := newNestedLayer(inner)

			resp, err := nestedGet(t, outer, srv.URL)
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Len(t, srv.Requests(), 3)
			assert.Equal(t, []Reason{ReasonExhausted}, outer.reasons)
			assert.EqualValues(t, 2, outer.Stats().Retries)
		})
	}
}

// unwrapper is a base that wraps another, as instrumenting transports do,
// and says so.
type unwrapper struct{ next http.RoundTripper }

func (u unwrapper) RoundTrip(r *http.Request) (*http.Response, error) { return u.next.RoundTrip(r) }
func (u unwrapper) Unwrap() http.RoundTripper                         { return u.next }

// An inner Transport reached inside the outer's first attempt retried, and
// its last answer's body is cut off while the outer reads it whole
// (BufferResponse): the outer does not retry that read's failure, which
// would multiply the attempts (3 of the inner's, then more of the
// outer's, each sent once). Found by the simulation (internal/sim).
func TestOuterBufferingDoesNotRetryWhatAnInnerRetried(t *testing.T) {
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n <= 2 {
			return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
		}
		resp := testutil.Response(req, http.StatusOK, nil, "cut")
		resp.ContentLength = 100 // the body ends after 3 bytes of 100
		return resp, nil
	}}
	inner := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{MaxAttempts: 3, Backoff: Constant(0)}}
	through := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return inner.RoundTrip(req.Clone(req.Context())) // an SDK's client, with the attempt's context
	})
	outer, ev := fakeTransport(through, Policy{BufferResponse: 1 << 10, Backoff: Constant(0)}, 0)
	_, err := outer.RoundTrip(testutil.Get(t, t.Context()))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 3, base.Attempts(), "the inner's 3 attempts, no more")
	require.Equal(t, []Reason{ReasonNoRetries}, ev.reasons())
}

// Nested Transports sharing one Budget: the inner one, the outer's Base,
// sends each of the outer's attempts once and asks nothing of the budget:
// the outer's retries spend one retry of credit each, and only they (the
// one that succeeds gives its retry back).
func TestNestedTransportsCreditASharedBudgetOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(0, 2) // two retries, never earned back (refilled at 0.2 a second)
		base := &testutil.Base{Answer: testutil.Statuses(503, 503, 200)}
		inner := &Transport{Base: base, Budget: b}
		outer := &Transport{Base: inner, Budget: b, Policy: Policy{MaxAttempts: 10, Backoff: Constant(0)}}
		resp, _ := sendOK(t, outer, testutil.Get(t, t.Context()))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 3, base.Attempts())
		assert.Equal(t, Stats{Requests: 3, Attempts: 3, GiveUps: map[Reason]uint64{}}, inner.Stats(),
			"the inner sent each attempt once")
		l := b.machine().Start("api.test")
		defer l.End()
		assert.True(t, l.Spend(time.Now()), "one retry of credit left")
		assert.False(t, l.Spend(time.Now()), "and only one: the retry was paid once")
	})
}

// A Transport that is the Base of another, directly or behind a wrapper
// that says so (Unwrap), sends every attempt once, the first included:
// only the outer Transport retries, with its own policy.
func TestTransportAsBaseSendsEachAttemptOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*Transport) http.RoundTripper
	}{
		{"directly", func(inner *Transport) http.RoundTripper { return inner }},
		{"behind a wrapper", func(inner *Transport) http.RoundTripper { return unwrapper{inner} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable)}
			inner := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Backoff: Constant(0)}}
			outer, ev := fakeTransport(tc.wrap(inner), Policy{MaxAttempts: 3, Backoff: Constant(0)}, 0)
			resp, _ := sendOK(t, outer, testutil.Get(t, t.Context()))
			assert.Equal(t, 3, base.Attempts(), "the outer's 3 attempts, each sent once")
			assert.Equal(t, 3, Attempts(resp))
			assert.Zero(t, inner.Stats().Retries)
			require.Equal(t, []Reason{ReasonExhausted}, ev.reasons())
		})
	}
}

// An attempt that PrepareRetry refused is over, unsent: its request no
// longer marks an attempt being sent, so a Transport it reaches later
// retries by its own policy.
func TestAnAttemptRefusedByPrepareRetryIsOver(t *testing.T) {
	var kept *http.Request
	outer, _ := fakeTransport(&testutil.Base{Answer: testutil.Statuses(503)}, Policy{MaxAttempts: 2, Backoff: Constant(0)}, 0)
	outer.PrepareRetry = func(r *http.Request) error {
		kept = r
		return errors.New("no signing key")
	}
	_, err := outer.RoundTrip(testutil.Get(t, t.Context()))
	require.Error(t, err)
	require.NotNil(t, kept)

	base := &testutil.Base{Answer: testutil.Statuses(503)}
	inner, _ := fakeTransport(base, Policy{MaxAttempts: 2, Backoff: Constant(0)}, 0)
	resp, err := inner.RoundTrip(kept.WithContext(kept.Context()))
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, 2, base.Attempts(), "not held to one attempt by an attempt that is over")
}

// A Transport beneath that made one attempt and gave up with an error (its
// *Error says 1 attempt) did not retry: the one above retries.
func TestAnInnerErrorAfterOneAttemptLeavesRetryingToTheOuter(t *testing.T) {
	base := &testutil.Base{Answer: testutil.ResetByPeer}
	inner := newNestedLayer(base)
	inner.Policy.MaxAttempts = 1
	// Reached inside the outer's attempts through a client of its own, as
	// an SDK's: the outer's first attempt is unmarked.
	outer := newNestedLayer(testutil.RoundTripFunc(inner.RoundTrip))
	_, err := outer.RoundTrip(testutil.Get(t, t.Context()))
	require.Error(t, err)
	assert.Equal(t, []Reason{ReasonNoRetries}, inner.reasons, "the inner's first, alone, gave up")
	assert.Equal(t, 3, base.Attempts(), "the outer's three attempts")
	assert.Equal(t, []Reason{ReasonExhausted}, outer.reasons)
}
