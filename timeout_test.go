package retryhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file run against real servers on loopback, in real
// time. Their bounds are generous: they prove that nothing waits for a
// timeout it should not, without failing on a loaded machine.

// lbServer starts a loopback server whose handler is told the number (from
// 1) of each request it gets. Its connections are closed when the test ends.
func lbServer(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *lbArrivals) {
	t.Helper()
	arrivals := new(lbArrivals)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(arrivals.add(), w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, arrivals
}

// lbArrivals records when each request reached the server.
type lbArrivals struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *lbArrivals) add() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.times = append(a.times, time.Now())
	return len(a.times)
}

func (a *lbArrivals) all() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...)
}

// lbTransport returns a Transport over a fresh pooled transport whose idle
// connections are closed when the test ends.
func lbTransport(t *testing.T, p Policy) *Transport {
	t.Helper()
	base := cleanhttp.DefaultPooledTransport()
	t.Cleanup(base.CloseIdleConnections)
	return &Transport{Base: base, Policy: p, Budget: UnlimitedBudget()}
}

// The first attempt reaches a server that never answers it; the attempt
// timeout (100 ms) abandons it and the second attempt gets the answer, long
// before the caller's 5 s deadline.
func TestLoopbackHungAttemptRescuedByAttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	srv, arrivals := lbServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-r.Context().Done(): // the client gave up on the connection
			case <-release:
			}
			return
		}
		io.WriteString(w, "rescued")
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	const attemptTimeout = 100 * time.Millisecond
	tr := lbTransport(t, Policy{AttemptTimeout: attemptTimeout, Backoff: Constant(10 * time.Millisecond)})
	var retries []RetryEvent
	tr.OnRetry = func(e *RetryEvent) { retries = append(retries, *e) }
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()

	resp, err := tr.RoundTrip(req)

	elapsed := time.Since(start)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "rescued", string(body))
	assert.Equal(t, 2, Attempts(resp))
	assert.Len(t, arrivals.all(), 2)
	require.Len(t, retries, 1)
	assert.ErrorIs(t, retries[0].Err, ErrAttemptTimeout)
	assert.GreaterOrEqual(t, elapsed, attemptTimeout, "the first attempt had its full time")
	assert.Less(t, elapsed, time.Second, "rescued well inside the 5 s deadline")
	t.Logf("hung attempt rescued after %v (attempt timeout %v, backoff 10ms)", elapsed.Round(time.Millisecond), attemptTimeout)
}

// The server sends the headers at once and then 1 MiB over 300 ms, three
// times the attempt timeout. The attempt timeout covers the wait for the
// headers only: the caller reads the whole body, intact, from one attempt.
func TestLoopbackSlowBodyOutlivesAttemptTimeout(t *testing.T) {
	const (
		attemptTimeout = 100 * time.Millisecond
		chunks         = 16
		pause          = 20 * time.Millisecond // between chunks: 15 pauses, 300 ms
	)
	payload := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{'r', 'e', 't', 'r', 'y'})
	rng.Read(payload)
	want := sha256.Sum256(payload)
	var streamedNs atomic.Int64 // how long the server took to send the body
	srv, arrivals := lbServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		start := time.Now()
		size := len(payload) / chunks
		for i := range chunks {
			if i > 0 {
				time.Sleep(pause)
			}
			if _, err := w.Write(payload[i*size : (i+1)*size]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		streamedNs.Store(int64(time.Since(start)))
	})
	tr := lbTransport(t, Policy{AttemptTimeout: attemptTimeout})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	start := time.Now()

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	headers := time.Since(start)

	// Read past the middle of the body: by then the server has paused at
	// least 7 times (140 ms), so an attempt timer still running would have
	// fired and canceled the attempt.
	h := sha256.New()
	_, err = io.CopyN(h, resp.Body, 1<<19+1)
	require.NoError(t, err)
	assert.NoError(t, resp.Request.Context().Err(), "the attempt is not canceled while the body is read")
	_, err = io.Copy(h, resp.Body)
	require.NoError(t, err, "the body is read to its end without a timeout")
	read := time.Since(start)
	assert.ErrorIs(t, resp.Request.Context().Err(), context.Canceled, "the attempt is released at EOF")
	require.NoError(t, resp.Body.Close())
	streamed := time.Duration(streamedNs.Load())

	assert.Equal(t, want[:], h.Sum(nil), "1 MiB received intact")
	assert.Equal(t, 1, Attempts(resp))
	assert.Len(t, arrivals.all(), 1)
	assert.GreaterOrEqual(t, streamed, 3*attemptTimeout, "the body took three attempt timeouts to send")
	t.Logf("headers after %v; 1 MiB read after %v; server streamed for %v (attempt timeout %v)",
		headers.Round(time.Millisecond), read.Round(time.Millisecond), streamed.Round(time.Millisecond), attemptTimeout)
}

// A 429 asking for one second is waited for one second plus a jitter of at
// most 100 ms, measured between the two arrivals at the server.
func TestLoopback429RetryAfterOneSecond(t *testing.T) {
	srv, arrivals := lbServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down")
			return
		}
		io.WriteString(w, "welcome back")
	})
	tr := lbTransport(t, Policy{})
	var retries []RetryEvent
	tr.OnRetry = func(e *RetryEvent) { retries = append(retries, *e) }
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)

	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, bytes.Equal([]byte("welcome back"), body))
	assert.Equal(t, 2, Attempts(resp))
	times := arrivals.all()
	require.Len(t, times, 2)
	gap := times[1].Sub(times[0])
	require.Len(t, retries, 1)
	assert.Equal(t, DelayRetryAfter, retries[0].Source)
	assert.GreaterOrEqual(t, retries[0].Delay, time.Second)
	assert.LessOrEqual(t, retries[0].Delay, 1100*time.Millisecond)
	assert.GreaterOrEqual(t, gap, time.Second, "never sooner than the server asked")
	assert.Less(t, gap, 1100*time.Millisecond+400*time.Millisecond, "1 s + at most 100 ms jitter + slack")
	t.Logf("429 Retry-After: 1 waited %v between arrivals (chosen wait %v)", gap.Round(time.Millisecond), retries[0].Delay.Round(time.Millisecond))
}

// An upgraded connection (101 Switching Protocols) stays writable through
// the body wrapper that AttemptTimeout puts on responses.
func TestLoopbackUpgradedConnectionWritableUnderAttemptTimeout(t *testing.T) {
	srv, _ := lbServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(brw, buf); err == nil {
			conn.Write(buf)
		}
	})
	tr := lbTransport(t, Policy{AttemptTimeout: 100 * time.Millisecond})
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	rw, ok := resp.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the upgraded body must stay writable, got %T", resp.Body)
	_, err = rw.Write([]byte("ping"))
	require.NoError(t, err)
	got := make([]byte, 4)
	_, err = io.ReadFull(rw, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
}
