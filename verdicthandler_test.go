package retryhttp_test

// VerdictHandler's ResponseWriter has every optional interface of the one
// it wraps, so what a service does with it (upgrade to WebSocket, flush,
// push, set deadlines) works the same behind it.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

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

// Over HTTP/1.1 and HTTP/2, the handler behind VerdictHandler sees the
// optional interfaces of the server's ResponseWriter, and
// http.ResponseController reaches the server's (a write deadline).
func TestVerdictHandlerKeepsTheWritersOptionalInterfaces(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			var outer, inner []string
			var deadlineErr error
			wrapped := retryhttp.VerdictHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// A WebSocket-style upgrade behind VerdictHandler works: the handler
// asserts http.Hijacker on its writer, as gorilla/websocket does.
func TestVerdictHandlerLetsAHandlerHijack(t *testing.T) {
	srv := httptest.NewServer(retryhttp.VerdictHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
