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
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			assert.NoError(t, resetStream(w, http3.ErrCodeRequestCanceled))
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
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
	assert.Equal(t, retryhttp.DelayRetryAfter, events[0].Source)
	assert.InDelta(t, 10*time.Millisecond, events[0].Delay, float64(5*time.Millisecond))
	assert.Equal(t, http.StatusServiceUnavailable, events[0].Response.StatusCode)
}

// An attempt that outlasts AttemptTimeout is cut off (its stream reset,
// its connection kept) and retried, all inside the caller's deadline.
func TestAttemptTimeoutInsideTheDeadline(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 || r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	h3 := newClient(t)
	p := fastRetries(3)
	p.AttemptTimeout = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()
	resp, body, err := send(New(h3, p), req)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, int64(1), srv.conns.Load(), "the timed-out attempt's stream was reset, not its connection")

	// The deadline bounds it all: an attempt timeout after it is not waited for.
	p.AttemptTimeout = time.Second
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hang", nil)
	require.NoError(t, err)
	_, _, err = send(New(h3, p), req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonDeadline, e.Reason)
}

// The default budget: requests that fail together are evidence for each
// other, and their retries wait in line for news of the host instead of
// each spending its attempts; the probe's success lets them go, and all are
// served.
func TestTheDefaultBudgetOverHTTP3(t *testing.T) {
	srv := newServer(t, failFirst(4, http.StatusServiceUnavailable, nil))
	h3 := newClient(t)
	tr := New(h3, retryhttp.Policy{Backoff: retryhttp.Constant(time.Millisecond)})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, body, err := get(t, tr, srv.URL)
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
func TestHedgeWinsAndResetsOnlyTheLosersStream(t *testing.T) {
	var n atomic.Int32
	loserErr := make(chan error, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			_, _ = w.Write([]byte("late"))
			loserErr <- w.(interface{ FlushError() error }).FlushError()
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	h3 := newClient(t)
	tr := New(h3, retryhttp.Policy{Hedge: &retryhttp.Hedge{Delay: 20 * time.Millisecond, Fraction: 1}})
	start := time.Now()
	resp, body, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.Less(t, time.Since(start), time.Second)

	err = <-loserErr
	var h3Err *http3.Error
	require.ErrorAs(t, err, &h3Err, "the loser's response could not be written")
	assert.Equal(t, http3.ErrCodeRequestCanceled, h3Err.ErrorCode)
	assert.True(t, h3Err.Remote, "the client reset the stream")

	_, body, err = get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		assert.Equal(t, int64(1), r.Conn)
	}
	assert.Equal(t, int64(1), srv.conns.Load(), "one QUIC connection throughout")
	st := tr.Stats()
	assert.Equal(t, uint64(1), st.Hedges)
	assert.Equal(t, uint64(1), st.HedgeWins)
	assert.Equal(t, uint64(3), st.Attempts)
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
