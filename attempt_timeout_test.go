package retryhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// The tests of this file run against real servers on loopback, in real
// time. Their bounds are generous: they prove that nothing waits for a
// timeout it should not, without failing on a loaded machine.

// The first attempt reaches a server that never answers it; the attempt
// timeout (100 ms) abandons it and the second attempt gets the answer, long
// before the caller's 5 s deadline.
func TestLoopbackHungAttemptRescuedByAttemptTimeout(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Hang(), retryhttptest.Status(200).WithBody("rescued"))
	const attemptTimeout = 100 * time.Millisecond
	tr := newTestTransport(t, Policy{AttemptTimeout: attemptTimeout, Backoff: Constant(10 * time.Millisecond)})
	ev := new(hookLog).watch(tr)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx))

	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, "rescued", testutil.ReadBody(t, resp))
	assert.Equal(t, 2, Attempts(resp))
	assert.Len(t, srv.Requests(), 2)
	require.Len(t, ev.retries, 1)
	assert.ErrorIs(t, ev.retries[0].Err, ErrAttemptTimeout)
	assert.GreaterOrEqual(t, elapsed, attemptTimeout, "the first attempt had its full time")
	assert.Less(t, elapsed, time.Second, "rescued well inside the 5 s deadline")
	t.Logf("hung attempt rescued after %v (attempt timeout %v, backoff 10ms)", elapsed.Round(time.Millisecond), attemptTimeout)
}

// The server sends the headers at once and then 1 MiB in ten pieces over
// 300 ms, three times the attempt timeout. The attempt timeout covers the
// wait for the headers only: the caller reads the whole body, intact, from
// one attempt.
func TestLoopbackSlowBodyOutlivesAttemptTimeout(t *testing.T) {
	const attemptTimeout = 100 * time.Millisecond
	body := testutil.Payload(1 << 20)
	srv := testutil.NewServer(t, retryhttptest.Status(200).WithBody(string(body)).SlowBody(3*attemptTimeout))
	tr := newTestTransport(t, Policy{AttemptTimeout: attemptTimeout})
	var attemptCtx context.Context // the context the base sent the attempt with
	base := tr.Base
	tr.Base = testutil.RoundTripFunc(func(r *http.Request) (*http.Response, error) {
		attemptCtx = r.Context()
		return base.RoundTrip(r)
	})
	start := time.Now()

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	headers := time.Since(start)

	// Read past the middle of the body: its sixth piece leaves the server
	// 180 ms after the headers, so an attempt timer still running would
	// have fired and canceled the attempt.
	h := sha256.New()
	_, err = io.CopyN(h, resp.Body, 1<<19+1)
	require.NoError(t, err)
	assert.NoError(t, attemptCtx.Err(), "the attempt is not canceled while the body is read")
	_, err = io.Copy(h, resp.Body)
	require.NoError(t, err, "the body is read to its end without a timeout")
	read := time.Since(start)
	assert.ErrorIs(t, attemptCtx.Err(), context.Canceled, "the attempt is released at EOF")
	assert.NoError(t, resp.Request.Context().Err(), "the response's request keeps the caller's context")
	require.NoError(t, resp.Body.Close())

	assert.Equal(t, testutil.SHA256Hex(body), hex.EncodeToString(h.Sum(nil)), "1 MiB received intact")
	assert.Equal(t, 1, Attempts(resp))
	assert.Len(t, srv.Requests(), 1)
	assert.GreaterOrEqual(t, read, 3*attemptTimeout, "the body took three attempt timeouts to arrive")
	t.Logf("headers after %v; 1 MiB read after %v (attempt timeout %v)",
		headers.Round(time.Millisecond), read.Round(time.Millisecond), attemptTimeout)
}

// A 429 asking for one second is waited for one second plus a jitter of at
// most 100 ms, measured between the two arrivals at the server.
func TestLoopback429RetryAfterOneSecond(t *testing.T) {
	srv := testutil.NewServer(t,
		retryhttptest.Status(429).WithHeader("Retry-After", "1").WithBody("slow down"),
		retryhttptest.Status(200).WithBody("welcome back"))
	tr := newTestTransport(t, Policy{})
	ev := new(hookLog).watch(tr)

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "welcome back", testutil.ReadBody(t, resp))
	assert.Equal(t, 2, Attempts(resp))
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	gap := reqs[1].Time.Sub(reqs[0].Time)
	require.Len(t, ev.retries, 1)
	delay := ev.retries[0].Delay
	assert.Equal(t, DelayRetryAfter, ev.retries[0].Source)
	assert.GreaterOrEqual(t, delay, time.Second)
	assert.LessOrEqual(t, delay, 1100*time.Millisecond)
	assert.GreaterOrEqual(t, gap, time.Second, "never sooner than the server asked")
	assert.Less(t, gap, 1100*time.Millisecond+400*time.Millisecond, "1 s + at most 100 ms jitter + slack")
	t.Logf("429 Retry-After: 1 waited %v between arrivals (chosen wait %v)", gap.Round(time.Millisecond), delay.Round(time.Millisecond))
}

// An upgraded connection (101 Switching Protocols) stays writable through
// the body wrapper that AttemptTimeout puts on responses.
func TestLoopbackUpgradedConnectionWritableUnderAttemptTimeout(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Respond(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	})))
	tr := newTestTransport(t, Policy{AttemptTimeout: 100 * time.Millisecond})
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
