package retryhttp

// Policy.BufferResponse reads an answer's body whole before handing it
// over, and retries an answer cut off or stalled mid-body; huge bounds read
// by the bytes that come, never by the length promised.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A response cut off mid-body is retried when BufferResponse is on: the
// caller reads a whole body from the attempt that delivered one. Without it,
// the caller's read fails, as through the bare transport.
func TestBufferResponseRetriesCutOffBody(t *testing.T) {
	full := strings.Repeat("x", 2001) // what CloseMidBody(1000) promises
	for _, tc := range []struct {
		name     string
		method   string
		key      bool
		policy   Policy
		attempts int  // attempts the server sees
		whole    bool // the caller reads the whole body
	}{
		{"GET, on", http.MethodGet, false, Policy{BufferResponse: 1 << 20}, 2, true},
		{"GET, off", http.MethodGet, false, Policy{}, 1, false},
		{"GET, body longer than the bound", http.MethodGet, false, Policy{BufferResponse: 100}, 1, false},
		{"keyed POST, on", http.MethodPost, true, Policy{BufferResponse: 1 << 20}, 2, true},
		{"POST without a key: not sent again", http.MethodPost, false, Policy{BufferResponse: 1 << 20}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testutil.NewServer(t, retryhttptest.CloseMidBody(1000), retryhttptest.Status(200).WithBody(full))
			tr := newTestTransport(t, tc.policy)
			req := testutil.NewRequest(t, tc.method, srv.URL, strings.NewReader("payload"))
			if tc.key {
				req.Header.Set(defaultKeyHeader, "k-1")
			}
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			got, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Len(t, srv.Requests(), tc.attempts)
			if tc.whole {
				require.NoError(t, rerr)
				assert.Equal(t, full, string(got), "the whole body")
				assert.Equal(t, 2, Attempts(resp))
			} else {
				assert.ErrorIs(t, rerr, io.ErrUnexpectedEOF, "the caller reads the cut as it happened")
			}
		})
	}
}

// A 503 asking for a wait whose body is then cut off while buffered is
// retried after the wait it asked for, not at the backoff: the header came
// whole, and it is the server's. Asked past MaxRetryAfter, the request
// stops with ReasonRetryAfter and the cut's error.
func TestACutBodysWaitHolds(t *testing.T) {
	for _, tc := range []struct {
		retryAfter string
		attempts   int32
		took       time.Duration
		reason     Reason
	}{
		{"2", 2, 2 * time.Second, 0},
		{"3600", 1, 0, ReasonRetryAfter},
	} {
		t.Run("Retry-After "+tc.retryAfter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
					if n.Add(1) == 1 {
						resp := testutil.Response(req, http.StatusServiceUnavailable,
							http.Header{"Retry-After": {tc.retryAfter}}, "short")
						resp.ContentLength = 100 // the body ends at 5 bytes: cut off
						return resp, nil
					}
					return testutil.Response(req, http.StatusOK, nil, "ok"), nil
				})
				tr := &Transport{Base: base, Policy: Policy{BufferResponse: 1 << 20, Backoff: Constant(time.Millisecond)},
					rand: func() float64 { return 0 }}
				var reason Reason
				tr.OnGiveUp = func(e *GiveUpEvent) { reason = e.Reason }
				start := time.Now()
				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
				assert.Equal(t, tc.took, time.Since(start))
				assert.Equal(t, tc.attempts, n.Load(), "attempts sent")
				assert.Equal(t, tc.reason, reason)
				if tc.reason != 0 {
					require.Error(t, err)
					assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, "ok", testutil.ReadBody(t, resp))
			})
		})
	}
}

// A chunked body cut off by the server (no Content-Length to check) is
// retried too.
func TestBufferResponseRetriesCutOffChunkedBody(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first half "))
		w.(http.Flusher).Flush() // chunked: no Content-Length
		if n.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the connection is cut mid-body
		}
		w.Write([]byte("second half"))
	}))
	srv.Config.ErrorLog = testutil.DiscardLog()
	t.Cleanup(srv.Close)
	tr := newTestTransport(t, Policy{BufferResponse: 1 << 20})
	resp, body := sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	assert.Equal(t, "first half second half", body)
	assert.Equal(t, 2, Attempts(resp))
	assert.EqualValues(t, 2, n.Load())
}

// With AttemptTimeout, a body that stalls is retried: the attempt's time
// covers its body when BufferResponse is on.
func TestBufferResponseRetriesStalledBody(t *testing.T) {
	stall := retryhttptest.Status(200).WithBody(strings.Repeat("s", 100)).SlowBody(time.Hour)
	srv := testutil.NewServer(t, stall, retryhttptest.Status(200).WithBody("fresh"))
	tr := newTestTransport(t, Policy{BufferResponse: 1 << 20, AttemptTimeout: 100 * time.Millisecond})
	start := time.Now()
	resp, body := sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	assert.Equal(t, "fresh", body)
	assert.Equal(t, 2, Attempts(resp))
	assert.Less(t, time.Since(start), 5*time.Second)
}

// Every attempt cut off: the caller gets an error naming the cut, not a
// truncated body.
func TestBufferResponseGivesUpWithAnError(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.CloseMidBody(10))
	tr := newTestTransport(t, Policy{BufferResponse: 1 << 20, MaxAttempts: 3})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.Nil(t, resp)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	gaveUp(t, err, ReasonExhausted, 3)
	assert.Len(t, srv.Requests(), 3)
}

// A body that arrives whole is handed over intact from memory, and its
// connection is reused by the next request.
func TestBufferResponseWholeBodyIntact(t *testing.T) {
	body := testutil.Payload(300 << 10)
	srv := testutil.NewServer(t, retryhttptest.Status(200).WithBody(string(body)))
	tr := newTestTransport(t, Policy{BufferResponse: 1 << 20})
	for range 2 {
		resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
		require.NoError(t, err)
		h := sha256.New()
		_, err = io.Copy(h, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, testutil.SHA256Hex(body), hex.EncodeToString(h.Sum(nil)))
	}
	assert.Equal(t, 1, srv.Conns(), "one connection for both")
}

// A response that has no content by its request's method or its status (a
// HEAD's answer, a 204, a 304) has no length to check: over HTTP/2, whose
// client gives a HEAD's answer an empty body and the header's
// Content-Length, it is whole at once, and not retried as cut (before the
// fix, every attempt read "0 bytes of 5").
func TestBufferResponseTakesAnswersWithoutContentAsWhole(t *testing.T) {
	srv, _, base := testutil.NewH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.WriteHeader(http.StatusOK)
			if r.Method != http.MethodHead {
				io.WriteString(w, "hello")
			}
		}
	}))
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodHead, "/", ""},
		{http.MethodGet, "/204", ""},
		{http.MethodGet, "/304", ""},
		{http.MethodGet, "/", "hello"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			tr := &Transport{Base: base, Policy: Policy{BufferResponse: 1 << 20, Backoff: Constant(0)}}
			resp, err := tr.RoundTrip(testutil.NewRequest(t, tc.method, srv.URL+tc.path, nil))
			require.NoError(t, err)
			assert.Equal(t, "HTTP/2.0", resp.Proto)
			assert.Equal(t, 1, Attempts(resp), "not retried as cut")
			assert.Equal(t, tc.body, testutil.ReadBody(t, resp))
		})
	}
}

// BufferResponse math.MaxInt64, "always whole", reads a body of unknown
// length (chunked) whole: none of it is lost.
func TestBufferResponseMaxInt64ReadsAChunkedBodyWhole(t *testing.T) {
	text := strings.Repeat("chunk ", 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, text[:100])
		w.(http.Flusher).Flush() // chunked: no Content-Length
		io.WriteString(w, text[100:])
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := &Transport{Base: base, Policy: Policy{BufferResponse: math.MaxInt64}}

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(t.Context()))

	require.NoError(t, err)
	assert.EqualValues(t, -1, resp.ContentLength)
	got := testutil.ReadBody(t, resp)
	assert.Equal(t, len(text), len(got), "bytes")
	assert.True(t, got == text, "the body, whole")
}

// A Content-Length near 2^63 that the body does not keep (3 bytes come)
// allocates by the bytes read, not by the promise: the attempt fails as
// cut short, and the retry's honest answer is returned.
func TestBufferResponseReadsAHugeContentLengthByTheBytesThatCome(t *testing.T) {
	for _, cl := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 62, 1 << 40} {
		t.Run(fmt.Sprint(cl), func(t *testing.T) {
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				if n == 1 {
					resp := testutil.Response(req, http.StatusOK, nil, "abc")
					resp.ContentLength = cl
					return resp, nil
				}
				return testutil.Response(req, http.StatusOK, nil, "ok"), nil
			}}
			tr := &Transport{Base: base, Policy: Policy{BufferResponse: math.MaxInt64, Backoff: Constant(0)}}

			_, body := getOK(t, tr)
			assert.Equal(t, "ok", body)
			assert.Equal(t, 2, base.Attempts())
		})
	}
}

// A request that cannot be sent again (MaxAttempts 1) has nothing to gain
// from buffering: its answer streams to the caller as it comes, a body cut
// short failing the caller's read rather than RoundTrip.
func TestBufferResponseLeavesARequestOfOneAttemptStreaming(t *testing.T) {
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		resp := testutil.Response(req, http.StatusOK, nil, "abc")
		resp.ContentLength = 10
		return resp, nil
	}}
	tr, _ := fakeTransport(base, Policy{MaxAttempts: 1, BufferResponse: 1 << 20}, 0)
	resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
	require.NoError(t, err, "not read in RoundTrip")
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "abc", string(got))
	assert.Equal(t, 1, base.Attempts())
}
