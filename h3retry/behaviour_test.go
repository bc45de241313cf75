package h3retry

// What a retryhttp.Transport does over HTTP/1 and HTTP/2, checked over
// HTTP/3 against the loopback quic-go server: bodies sent again whole,
// idempotency keys, Retry-After, attempt timeouts, the budget, hedging,
// Attempts and Stats. Waits are real (quic-go's UDP sockets keep a
// testing/synctest bubble from ever going idle), so they are kept to a few
// milliseconds.

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// failFirst answers its first n requests with status (and header h), the
// rest 200 "ok".
func failFirst(n int32, status int, h http.Header) http.HandlerFunc {
	var seen atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// backstop bounds a wait that ends at once unless the behaviour a test
// checks is broken: the test then fails instead of hanging. It is no
// margin: a test's outcome never depends on how close it comes.
const backstop = 10 * time.Second

// doWithin is do under a deadline of backstop.
func doWithin(t testing.TB, rt http.RoundTripper, method, url, body string) (*http.Response, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bodyOf(body))
	require.NoError(t, err)
	return send(rt, req)
}

// attemptHeader carries to the test server the number of the attempt a
// request belongs to (see numbered).
const attemptHeader = "Test-Attempt"

// numbered returns a base over rt that sends each attempt with its number
// (retryhttp.AttemptNumber: 1 for the first, 2 for the hedge or retry
// after it) in attemptHeader, so that a handler tells the attempts apart
// however they reach it.
func numbered(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set(attemptHeader, strconv.Itoa(retryhttp.AttemptNumber(req.Context())))
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// writeAfterReset writes a response on a stream the client has reset and
// returns the write's error.
func writeAfterReset(w http.ResponseWriter) error {
	_, _ = w.Write([]byte("late"))
	return w.(interface{ FlushError() error }).FlushError()
}

// A PUT's body and a POST's (each with GetBody, as http.NewRequest gives a
// strings.Reader) go whole with every attempt.
func TestBodiesAreSentAgainWhole(t *testing.T) {
	srv := newServer(t, failFirst(2, http.StatusServiceUnavailable, nil))
	h3 := newClient(t)
	payload := strings.Repeat("x", 100<<10) // more than a few QUIC packets
	resp, body, err := do(t, New(h3, fastRetries(4)), http.MethodPut, srv.URL+"/doc", payload)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 3, retryhttp.Attempts(resp))

	// A POST with a key of its own may be retried too; its body is one that
	// the Transport buffers (no GetBody, a known length).
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/pay", io.NopCloser(strings.NewReader("charge")))
	require.NoError(t, err)
	req.ContentLength = int64(len("charge"))
	req.Header.Set("Idempotency-Key", "k1")
	srv.setHandler(failFirst(1, http.StatusServiceUnavailable, nil))
	resp, body, err = send(New(h3, fastRetries(4)), req)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))

	reqs := srv.Requests()
	require.Len(t, reqs, 5)
	for _, r := range reqs[:3] {
		assert.Equal(t, testutil.SHA256Hex([]byte(payload)), r.BodySHA256, "the PUT's body, whole, each time")
	}
	for _, r := range reqs[3:] {
		assert.Equal(t, testutil.SHA256Hex([]byte("charge")), r.BodySHA256, "the POST's body, whole, each time")
		assert.Equal(t, "k1", r.Key)
	}
}

// With IdempotencyKeys on, an unkeyed POST gets a key, the same on every
// attempt, and so is retried after H3_REQUEST_CANCELLED, a failure that
// may have been processed.
func TestIdempotencyKeyIsTheSameOnEveryAttempt(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, resetsThenOK(t, &n, 2, http3.ErrCodeRequestCanceled))
	h3 := newClient(t)
	p := fastRetries(4)
	p.IdempotencyKeys = &retryhttp.IdempotencyKeys{}
	resp, body, err := do(t, New(h3, p), http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 3, retryhttp.Attempts(resp))
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.NotEmpty(t, reqs[0].Key)
	for _, r := range reqs {
		assert.Equal(t, reqs[0].Key, r.Key)
		assert.Equal(t, testutil.SHA256Hex([]byte("charge")), r.BodySHA256)
	}
}

// A 503 with Retry-After-Ms: 10 is retried after the server's wait, which
// the Transport reports as its source.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv := newServer(t, failFirst(1, http.StatusServiceUnavailable, http.Header{"Retry-After-Ms": {"10"}}))
	h3 := newClient(t)
	tr := New(h3, retryhttp.Policy{Backoff: retryhttp.Constant(time.Hour)}) // the server's wait, not this
	var events []retryhttp.RetryEvent
	tr.OnRetry = func(e *retryhttp.RetryEvent) { events = append(events, *e) }
	start := time.Now()
	resp, body, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.GreaterOrEqual(t, time.Since(start), 10*time.Millisecond)
	require.Len(t, events, 1)
	assert.Equal(t, "Retry-After", events[0].Source)
	assert.InDelta(t, 10*time.Millisecond, events[0].Delay, float64(5*time.Millisecond))
	assert.Equal(t, http.StatusServiceUnavailable, events[0].Response.StatusCode)
}

// An attempt that outlasts AttemptTimeout is cut off (its stream reset,
// its connection kept) and retried, all inside the caller's deadline.
//
// What is HTTP/3's here is what the cut does: quic-go resets the stream
// with H3_REQUEST_CANCELLED, the connection carries on, and the base hands
// the context's error back for the core to retry. When the cut comes, and
// that one cut makes exactly one retry, are the core's to test, in fake
// time (TestAttemptTimeoutRetriedThenSucceeds and
// TestAttemptTimeoutNeverExtendsPastDeadline), not here: on a loaded
// machine a real 50 ms may pass before an attempt's request reaches the
// handler, or before the retry's answer comes back. So the server holds
// every request to /slow until it has seen a stream of one of them reset,
// and answers the ones after at once: the answer comes only after a cut
// the server saw, whichever attempt that was. Under no load it is the
// first, and the second attempt is answered.
func TestAttemptTimeoutInsideTheDeadline(t *testing.T) {
	const maxAttempts = 10
	resets := make(chan error, maxAttempts) // each cut seen by the server: its write's error
	cutSeen := make(chan struct{})
	var closeCutSeen sync.Once
	testDone := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-cutSeen:
			case <-r.Context().Done(): // the client reset the stream
				resets <- writeAfterReset(w)
				closeCutSeen.Do(func() { close(cutSeen) })
				return
			case <-testDone:
				return
			}
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-testDone:
			}
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	t.Cleanup(func() { close(testDone) }) // before the server closes
	h3 := newClient(t)
	// The connection first, so that the first attempt's time is its
	// request's, not the handshake's as well.
	_, _, err := get(t, NewBase(h3), srv.URL+"/warm")
	require.NoError(t, err)

	p := fastRetries(maxAttempts)
	p.AttemptTimeout = 50 * time.Millisecond
	tr := New(h3, p)
	var events []retryhttp.RetryEvent
	tr.OnRetry = func(e *retryhttp.RetryEvent) { events = append(events, *e) }
	resp, body, err := doWithin(t, tr, http.MethodGet, srv.URL+"/slow", "")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	n := retryhttp.Attempts(resp)
	assert.GreaterOrEqual(t, n, 2, "the first attempt was cut off and retried")
	require.Len(t, events, n-1, "a retry after each attempt but the last")
	for i, e := range events {
		assert.Equal(t, i+1, e.Attempt)
		assert.ErrorIs(t, e.Err, retryhttp.ErrAttemptTimeout, "attempt %d ended by its attempt timeout", i+1)
	}
	require.NotEmpty(t, resets, "the server saw a cut before it answered")
	for len(resets) > 0 {
		var h3Err *http3.Error
		require.ErrorAs(t, <-resets, &h3Err, "a cut attempt's response could not be written")
		assert.Equal(t, http3.ErrCodeRequestCanceled, h3Err.ErrorCode)
		assert.True(t, h3Err.Remote, "the client reset the stream")
	}
	for _, r := range srv.Requests() {
		assert.Equal(t, int64(1), r.Conn, "%s on the first connection", r.Path)
	}
	assert.Equal(t, int64(1), srv.conns.Load(), "the timed-out attempt's stream was reset, not its connection")

	// The deadline bounds it all: an attempt timeout after it is not waited
	// for. The attempt's context ends with the caller's deadline, not with
	// its own timeout (a core that let an attempt outlive the deadline
	// would end it with ErrAttemptTimeout, a second later).
	p.AttemptTimeout = time.Second
	ended := make(chan error, 1) // why the attempt's context had ended when quic-go returned
	tr = &retryhttp.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := NewBase(h3).RoundTrip(r)
		ended <- context.Cause(r.Context())
		return resp, err
	}), Policy: p}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
	require.NoError(t, err)
	_, _, err = send(tr, req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, retryhttp.ErrAttemptTimeout)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonDeadline, e.Reason)
	assert.Equal(t, 1, e.Attempts)
	require.Len(t, ended, 1)
	assert.ErrorIs(t, <-ended, context.DeadlineExceeded, "the deadline ended the attempt")
}

// The default budget: requests that fail together are evidence for each
// other, and their retries wait in line for news of the host instead of
// each spending its attempts; the probe's success lets them go, and all are
// served.
//
// "Together" is made so whatever the scheduler does, not left to four
// goroutines started at once: the server answers each request's first
// attempt (numbered) 503 and its retry 200, holds the 503s until the four
// first attempts have all arrived, so that each failure finds the three
// other requests in flight, and holds the retries' answers until the host's
// line has let a retry go (Stats.BudgetWaits), so that no success comes
// between the failures. (Answering the first four requests to arrive 503
// let a request's retry overtake another's first attempt on a loaded
// machine, and take the last 503.) Which retries wait, for how long, and
// how the line lets them go are the core's to test, in fake time
// (internal/budget and budget_test.go).
func TestTheDefaultBudgetOverHTTP3(t *testing.T) {
	const together = 4
	h3 := newClient(t)
	// The Transport before the server, whose handler reads its Stats.
	tr := &retryhttp.Transport{Base: numbered(NewBase(h3)), Policy: retryhttp.Policy{Backoff: retryhttp.Constant(time.Millisecond)}}
	var firsts atomic.Int32
	allIn := make(chan struct{})
	testDone := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/together":
		case r.Header.Get(attemptHeader) == "1":
			if firsts.Add(1) == together {
				close(allIn)
			}
			select {
			case <-allIn:
				w.WriteHeader(http.StatusServiceUnavailable)
			case <-r.Context().Done():
			case <-testDone:
			}
			return
		default:
			for tr.Stats().BudgetWaits == 0 { // polled: OnRetry does not tell a line's release from a backoff's end
				select {
				case <-r.Context().Done():
					return
				case <-testDone:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	t.Cleanup(func() { close(testDone) }) // before the server closes
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	var wg sync.WaitGroup
	for range together {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/together", nil)
			if !assert.NoError(t, err) {
				return
			}
			resp, body, err := send(tr, req)
			if assert.NoError(t, err) {
				assert.Equal(t, "ok", body)
				assert.Equal(t, 2, retryhttp.Attempts(resp))
			}
		})
	}
	wg.Wait()
	for range 4 {
		resp, _, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, 1, retryhttp.Attempts(resp))
	}
	st := tr.Stats()
	assert.Equal(t, uint64(8), st.Requests)
	assert.Equal(t, uint64(12), st.Attempts)
	assert.Equal(t, uint64(4), st.Retries)
	assert.Positive(t, st.BudgetWaits, "retries waited in the host's line")
	assert.Empty(t, st.GiveUps)
	assert.Equal(t, int64(1), srv.conns.Load(), "one QUIC connection carried them all")
}

// Hedging: the first attempt hangs, a hedge goes after the fixed delay and
// wins. The loser's stream is reset (the server's write on it fails with
// the client's H3_REQUEST_CANCELLED), and its connection is not: one QUIC
// connection carries both, and the next request.
//
// The server tells the attempts apart by the number the client gives each
// (numbered), not by the order they reach it in: both may wait for the
// connection's handshake, which can outlast the 20 ms delay, and then
// either may reach the handler first. The first attempt is held until its
// stream is reset, and the hedge's answer until the first attempt has
// reached the handler, so that the reset has a request to end there: the
// hedge wins however late either goes. That it goes at the delay, not
// before, and that the loser is canceled once it has won, are the core's
// to test in fake time (TestHedgeAfterTheDelayWins).
func TestHedgeWinsAndResetsOnlyTheLosersStream(t *testing.T) {
	firstIn := make(chan struct{})
	loserErr := make(chan error, 1)
	testDone := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/hedged":
		case r.Header.Get(attemptHeader) == "1":
			close(firstIn)
			select {
			case <-r.Context().Done(): // the client reset the stream
				loserErr <- writeAfterReset(w)
			case <-testDone:
			}
			return
		default:
			select {
			case <-firstIn:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	t.Cleanup(func() { close(testDone) }) // before the server closes
	h3 := newClient(t)
	tr := &retryhttp.Transport{Base: numbered(NewBase(h3)), Policy: retryhttp.Policy{Hedge: &retryhttp.Hedge{After: 20 * time.Millisecond, Fraction: 1}}}
	resp, body, err := doWithin(t, tr, http.MethodGet, srv.URL+"/hedged", "")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp), "the hedge won")

	select {
	case err = <-loserErr:
	case <-time.After(backstop):
		t.Fatal("the loser's stream was not reset")
	}
	var h3Err *http3.Error
	require.ErrorAs(t, err, &h3Err, "the loser's response could not be written")
	assert.Equal(t, http3.ErrCodeRequestCanceled, h3Err.ErrorCode)
	assert.True(t, h3Err.Remote, "the client reset the stream")
	st := tr.Stats()
	assert.Equal(t, uint64(1), st.Hedges)
	assert.Equal(t, uint64(1), st.HedgeWins)
	assert.Equal(t, uint64(2), st.Attempts)

	// The next request, sent once (a hedge of it would be one more
	// request), on the same connection.
	_, body, err = get(t, NewBase(h3), srv.URL+"/next")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.ElementsMatch(t, []string{"/hedged", "/hedged", "/next"}, []string{reqs[0].Path, reqs[1].Path, reqs[2].Path})
	for _, r := range reqs {
		assert.Equal(t, int64(1), r.Conn)
	}
	assert.Equal(t, int64(1), srv.conns.Load(), "one QUIC connection throughout")
}

// A status the policy does not retry comes back as it is, after one
// attempt; a retryable one, when attempts run out, as the last response.
func TestResponsesComeBackAsTheyAre(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	h3 := newClient(t)
	tr := New(h3, fastRetries(2))
	resp, _, err := get(t, tr, srv.URL+"/missing")
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, 1, retryhttp.Attempts(resp))
	assert.Equal(t, "HTTP/3.0", resp.Proto)

	resp, _, err = get(t, tr, srv.URL+"/down")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	st := tr.Stats()
	assert.Equal(t, uint64(1), st.GiveUps[retryhttp.ReasonExhausted])
}

// CloseIdleConnections on the Transport (or an http.Client over it) closes
// quic-go's idle connections: the next request opens a new one.
func TestCloseIdleConnectionsReachesQuicGo(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	client := &http.Client{Transport: New(newClient(t), retryhttp.Policy{})}
	for range 2 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		client.CloseIdleConnections()
	}
	assert.Equal(t, int64(2), srv.conns.Load())
}
