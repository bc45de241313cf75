package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// h2Cancel is the HTTP/2 error code CANCEL (RFC 9113 section 7), with
// which a test's server resets a stream.
const h2Cancel = 0x8

// h2StreamError has the fields of net/http's HTTP/2 stream error, whose
// As method fills any struct of that shape.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// TestConnectionClosedUnderRequestMethods replays real errors of a
// connection closed under a request through a Transport, one per method
// kind, and checks the method rules: an idempotent or keyed request is
// sent again; an unkeyed POST only when nothing of it can have reached the
// server.
func TestConnectionClosedUnderRequestMethods(t *testing.T) {
	errs := map[string]error{
		"force closed":       testutil.ForceClosedErr(t),
		"not established":    testutil.NotEstablishedErr(t),
		"server closed idle": testutil.ServerClosedIdleErr(t),
		"write on closed":    testutil.WriteOnClosedConnErr(t),
	}
	cases := []struct {
		err    string
		method string
		key    bool
		want   int    // attempts
		reason Reason // 0: the retry succeeded
	}{
		{err: "force closed", method: "GET", want: 2},
		{err: "force closed", method: "POST", key: true, want: 2},
		{err: "force closed", method: "POST", want: 1, reason: ReasonUnsafe},
		{err: "not established", method: "POST", want: 2},
		{err: "server closed idle", method: "PUT", want: 2},
		{err: "server closed idle", method: "POST", want: 1, reason: ReasonUnsafe},
		{err: "write on closed", method: "POST", key: true, want: 2},
		{err: "write on closed", method: "POST", want: 1, reason: ReasonUnsafe},
	}
	for _, tc := range cases {
		name := tc.method
		if tc.key {
			name += " with a key"
		}
		t.Run(tc.err+", "+name, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.FailsOnce(errs[tc.err])}
			tr, g := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
			req := testutil.NewRequest(t, tc.method, "http://api.test/", strings.NewReader("body"))
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}

			resp, err := testutil.RoundTrip(t, tr, req)

			assert.Equal(t, tc.want, base.Attempts(), "attempts")
			if tc.reason == 0 {
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				return
			}
			gaveUp(t, err, tc.reason, 0)
			assert.Equal(t, []Reason{tc.reason}, g.reasons())
		})
	}
}

// TestHTTP2AbruptClosesUnderConcurrentGETs sends 200 GETs at once on one
// HTTP/2 connection while the server closes its connections abruptly five
// times, with requests waiting for their responses and others being sent.
// Each in-flight stream fails with what net/http makes of the close: a
// reset where its read loop saw the close first; "client connection force
// closed" where a stream's write failed first (net/http then closes the
// connection under every other stream); "could not be established" for a
// connection that closed before its first stream. Which comes first is a
// race inside net/http, so the mix varies from run to run
// (TestClassifyRealErrors, in internal/classify, produces each error
// deterministically). Every GET is idempotent and must get through.
//
// The closes happen on events, not on a clock: as the client makes its
// 60th write on a connection, in the middle of sending a burst of
// requests, or, when fewer requests are left to send, once every request
// still unanswered waits in the server.
func TestHTTP2AbruptClosesUnderConcurrentGETs(t *testing.T) {
	const requests, closes, writes = 200, 5, 60
	var (
		mu      sync.Mutex
		ln      *testutil.AbortListener
		parked  int        // requests waiting in the handler since the last close
		gen     int        // closes so far
		live    = requests // requests not yet answered to the client
		allDone = make(chan struct{})
	)
	// kill closes the server's connections, unless it has closed them
	// often enough. Requires mu held.
	kill := func() {
		if gen == closes {
			return
		}
		gen++
		parked = 0
		ln.Abort()
		if gen == closes {
			close(allDone)
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path == "/warm" || gen == closes {
			mu.Unlock()
			return
		}
		parked++
		g := gen
		if parked == live {
			kill()
		}
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-allDone:
		}
		mu.Lock()
		if gen == g {
			parked--
		}
		mu.Unlock()
	})
	s, ln, base := testutil.NewH2Server(t, h)
	base.MaxConnsPerHost = 1 // one HTTP/2 connection at a time, as the GETs start on
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var n int // writes on c, which net/http makes one at a time
		return &writeHookConn{Conn: c, beforeWrite: func() {
			if n++; n == writes {
				mu.Lock()
				kill()
				mu.Unlock()
			}
		}}, nil
	}
	t.Cleanup(base.CloseIdleConnections)
	tr := &Transport{
		Base:   base,
		Policy: Policy{MaxAttempts: 4 * closes, Backoff: Constant(time.Millisecond)},
		Budget: UnlimitedBudget(),
	}
	resp, err := tr.RoundTrip(testutil.NewRequest(t, "GET", s.URL+"/warm", nil)) // the one connection the GETs start on
	require.NoError(t, err)
	require.Equal(t, "HTTP/2.0", resp.Proto)
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a bound only a hang reaches
	defer cancel()
	var wg sync.WaitGroup
	var ok int
	failures := make(map[string]int)
	for range requests {
		req := testutil.NewRequest(t, "GET", s.URL, nil).WithContext(ctx)
		wg.Go(func() {
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else {
				var e *Error
				if errors.As(err, &e) {
					err = e.Err
				}
				failures[loopbackPort.ReplaceAllString(err.Error(), "127.0.0.1:*")]++
			}
			live--
			if live > 0 && parked == live {
				kill()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	conns := ln.Count()
	t.Logf("%d of %d GETs succeeded (%.0f %%) through %d abrupt closes; %d attempts on %d connections; failures: %v",
		ok, requests, 100*float64(ok)/requests, gen, tr.Stats().Attempts-1, conns, failures)
	assert.Equal(t, closes, gen, "closes")
	assert.Equal(t, requests, ok, "GETs that got through")
}

// writeHookConn is a client connection that calls beforeWrite before each
// write.
type writeHookConn struct {
	net.Conn
	beforeWrite func()
}

func (c *writeHookConn) Write(p []byte) (int, error) {
	c.beforeWrite()
	return c.Conn.Write(p)
}

// loopbackPort matches a loopback address with its port, so that errors
// differing only in ports count as one.
var loopbackPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// TestKeyedPOSTsThroughACuttingProxy sends keyed POSTs of 1 MiB over
// HTTPS through a proxy that cuts every other connection after 64 KiB of
// the request. Where the client's read loop sees the reset first, it
// closes the connection and the body's next write meets it closed: the
// attempt fails with "use of closed network connection" (net.ErrClosed);
// the others fail with the reset itself. A keyed POST is safe to send
// again; each must get through, and the server must receive each body
// whole on the attempt that succeeds.
func TestKeyedPOSTsThroughACuttingProxy(t *testing.T) {
	const posts, size = 20, 1 << 20
	backend := retryhttptest.NewTLSServer(retryhttptest.Sequence(retryhttptest.Status(200)))
	t.Cleanup(backend.Close)
	proxy := testutil.NewCutProxy(t, backend.URL, 64<<10, func(n int) bool { return n%2 == 1 })
	base := backend.Client().Transport.(*http.Transport).Clone()
	base.ForceAttemptHTTP2 = false // HTTP/1.1, as many proxies speak it
	base.TLSClientConfig.NextProtos = nil
	base.DisableKeepAlives = true // each attempt on its own connection: the first cut, the second not
	t.Cleanup(base.CloseIdleConnections)
	tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 2, Backoff: Constant(time.Millisecond)}, Budget: UnlimitedBudget()}
	g := new(hookLog).watch(tr)
	body := testutil.Payload(size)

	var ok int
	for i := range posts {
		req := testutil.NewRequest(t, "POST", proxy.URL, bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("post-%d", i))
		resp, err := tr.RoundTrip(req)
		if assert.NoError(t, err, "POST %d", i) {
			resp.Body.Close()
			ok++
		}
	}
	var closedErrs int
	for _, e := range g.retries {
		if errors.Is(e.Err, net.ErrClosed) {
			closedErrs++
		}
	}
	t.Logf("%d of %d keyed POSTs got through; %d retries, %d of them after net.ErrClosed", ok, posts, len(g.retries), closedErrs)
	assert.Equal(t, posts, ok)
	var whole int
	for _, r := range backend.Requests() {
		if r.BodyErr == nil && r.BodyLen == size && r.BodySHA256 == testutil.SHA256Hex(body) {
			whole++
		}
	}
	assert.Equal(t, posts, whole, "bodies received whole")
}

// A stream the server resets with CANCEL is sent again on a new stream when
// the request may be sent again (an idempotent method, or a key), as OkHttp
// and Envoy do, and as the README's "stream resets" promise; a POST without
// a key is not (before the fix, a GET was not retried).
func TestAStreamResetWithCancelIsRetried(t *testing.T) {
	for _, tc := range []struct {
		method   string
		key      bool
		attempts int
	}{
		{http.MethodGet, false, 2},
		{http.MethodPost, true, 2},
		{http.MethodPost, false, 1},
	} {
		t.Run(fmt.Sprintf("%s, key %v", tc.method, tc.key), func(t *testing.T) {
			var streams atomic.Int32
			s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
				for {
					id, err := c.Request()
					if err != nil {
						return
					}
					if streams.Add(1) == 1 {
						c.Reset(id, h2Cancel)
					} else {
						c.OK(id)
					}
				}
			})
			tr := &Transport{Base: testutil.H2CTransport(t), Policy: Policy{Backoff: Constant(0)}}
			req := testutil.NewRequest(t, tc.method, s.URL, strings.NewReader("a=1"))
			if tc.key {
				req.Header.Set("Idempotency-Key", "k-1")
			}
			resp, err := tr.RoundTrip(req)
			if tc.attempts == 1 {
				var se h2StreamError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, uint32(h2Cancel), se.Code)
			} else {
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
			}
			assert.EqualValues(t, tc.attempts, streams.Load(), "streams opened")
		})
	}
}
