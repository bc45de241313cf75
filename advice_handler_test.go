package retryhttp

// AdviceHandler keeps retries to one layer of a chain of services, and its
// ResponseWriter has every optional interface of the one it wraps, so what
// a service does with it (upgrade to WebSocket, flush, push, set deadlines)
// works the same behind it.

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// chain starts three loopback services: the first and second call the next
// through a retryhttp Transport (Policy p, budget b for each) and answer 503
// when that call fails; the third is down (503 always). wrap, if set, wraps
// the handlers of the first two. It returns the first's URL and the count of
// requests the third received.
func chain(t *testing.T, p Policy, budget func() *Budget, wrap func(http.Handler) http.Handler) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	last := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(last.Close)
	next := last.URL
	for range 2 {
		base := testutil.LoopbackBase(t)
		client := &http.Client{Transport: &Transport{Base: base, Policy: p, Budget: budget()}}
		target := next
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode >= 500 {
				http.Error(w, fmt.Sprintf("upstream: %d", resp.StatusCode), http.StatusServiceUnavailable)
				return
			}
			io.Copy(w, resp.Body)
		})
		if wrap != nil {
			h = wrap(h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		next = srv.URL
	}
	return next, &hits
}

// A chain of three services, each retrying 4 times, the last one down: 16
// attempts reach the last; with AdviceHandler on the others, 4 (the middle
// one's), because the middle one's 503 says not to retry it.
func TestAdviceHandlerKeepsRetriesToOneLayer(t *testing.T) {
	p := Policy{Backoff: Constant(time.Millisecond)}
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		hits int32
	}{
		{"without", nil, 16},
		{"with AdviceHandler", AdviceHandler, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, hits := chain(t, p, UnlimitedBudget, tc.wrap)
			resp, err := http.Get(url)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, tc.hits, hits.Load(), "requests that reached the last service")
			if tc.wrap != nil {
				assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
			}
		})
	}
}

// The verdict goes only on a 5xx that follows a call given up on a failing
// dependency, and never replaces the handler's own.
func TestAdviceHandlerMarksOnlyFailuresAfterRetries(t *testing.T) {
	down := testutil.NewServer(t, testutil.Answers(503)...)
	tr := newTestTransport(t, Policy{MaxAttempts: 2})
	call := func(r *http.Request, p *Policy) {
		ctx := r.Context()
		if p != nil {
			ctx = WithPolicy(ctx, *p)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"gave up after 2 attempts, then 503", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "false"},
		{"implicit 200 after a give-up", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			io.WriteString(w, "served from cache")
		}, ""},
		{"one attempt only: the caller may retry", func(w http.ResponseWriter, r *http.Request) {
			call(r, &Policy{MaxAttempts: 1})
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"no call at all", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"the handler's own verdict stands", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.Header().Set("X-Should-Retry", "true")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "true"},
		{"the handler's own Stripe verdict stands", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.Header().Set("Stripe-Should-Retry", "true")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"flushed before the header", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			http.NewResponseController(w).Flush() // via Unwrap: an implicit 200
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(AdviceHandler(tc.handler))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.want, resp.Header.Get("X-Should-Retry"))
		})
	}
}

// An SDK inside the handler that tries a request twice, one attempt each
// time, has made two attempts at a dependency that is down: the handler's
// 5xx carries the verdict, whether the SDK's second try is told apart by
// the request's idempotency key or by its SDK's attempt header.
func TestAdviceHandlerCountsTheTriesOfAnSDKInside(t *testing.T) {
	down := testutil.NewServer(t, testutil.Answers(503)...)
	tr := newTestTransport(t, Policy{MaxAttempts: 2})
	try := func(r *http.Request, p Policy, method string, h http.Header) {
		req, _ := http.NewRequestWithContext(WithPolicy(r.Context(), p), method, down.URL, nil)
		maps.Copy(req.Header, h)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	once := Policy{MaxAttempts: 1}
	for _, tc := range []struct {
		name   string
		method string
		first  http.Header
		second http.Header
	}{
		{"by its key", http.MethodPost,
			http.Header{"Idempotency-Key": {"k1"}}, http.Header{"Idempotency-Key": {"k1"}}},
		{"by its attempt header", http.MethodGet,
			http.Header{"Amz-Sdk-Request": {"attempt=1; max=2"}}, http.Header{"Amz-Sdk-Request": {"attempt=2; max=2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := len(down.Requests())
			srv := httptest.NewServer(AdviceHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				try(r, once, tc.method, tc.first)                    // one attempt: a caller may retry that
				try(r, Policy{MaxAttempts: 2}, tc.method, tc.second) // the attempt left, or none more
				w.WriteHeader(http.StatusBadGateway)
			})))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 2, len(down.Requests())-first, "two attempts in all")
			assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
		})
	}
}

// optional lists the optional interfaces w has.
func optional(w http.ResponseWriter) []string {
	var has []string
	for name, ok := range map[string]bool{
		"http.Flusher":    is[http.Flusher](w),
		"http.Hijacker":   is[http.Hijacker](w),
		"http.Pusher":     is[http.Pusher](w),
		"io.ReaderFrom":   is[io.ReaderFrom](w),
		"io.StringWriter": is[io.StringWriter](w),
		// http.CloseNotifier: deprecated, but some handlers still assert
		// it; named by its method, as handler.go does.
		"CloseNotifier": is[interface{ CloseNotify() <-chan bool }](w),
	} {
		if ok {
			has = append(has, name)
		}
	}
	return has
}

func is[T any](w http.ResponseWriter) bool {
	_, ok := w.(T)
	return ok
}

// Over HTTP/1.1 and HTTP/2, the handler behind AdviceHandler sees the
// optional interfaces of the server's ResponseWriter, and
// http.ResponseController reaches the server's (a write deadline).
func TestAdviceHandlerKeepsTheWritersOptionalInterfaces(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			var outer, inner []string
			var deadlineErr error
			wrapped := AdviceHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inner = optional(w)
				deadlineErr = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute))
				io.WriteString(w, "ok")
			}))
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				outer = optional(w)
				wrapped.ServeHTTP(w, r)
			}))
			srv.EnableHTTP2 = h2
			if h2 {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			client := srv.Client()
			defer client.CloseIdleConnections()

			resp, err := client.Get(srv.URL)

			require.NoError(t, err)
			assert.Equal(t, "ok", testutil.ReadBody(t, resp))
			assert.Equal(t, h2, resp.ProtoMajor == 2, "protocol")
			assert.NotEmpty(t, outer)
			assert.ElementsMatch(t, outer, inner)
			assert.NoError(t, deadlineErr, "SetWriteDeadline through http.ResponseController")
		})
	}
}

// A WebSocket-style upgrade behind AdviceHandler works: the handler
// asserts http.Hijacker on its writer, as gorilla/websocket does.
func TestAdviceHandlerLetsAHandlerHijack(t *testing.T) {
	srv := httptest.NewServer(AdviceHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "websocket: response does not implement http.Hijacker", http.StatusInternalServerError)
			return
		}
		conn, rw, err := hj.Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		rw.WriteString(line)
		rw.Flush()
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()

	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	io.WriteString(conn, "ping\n")
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "ping\n", line)
}
