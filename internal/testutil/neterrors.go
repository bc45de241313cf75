package testutil

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// Real errors of a connection closed under a request, made by a real
// net/http client on loopback: internal/classify's tests classify them,
// the core's replay them through its Transport.

// RoundTripErr sends req through rt and returns its error, which must not
// be nil. A response's body is closed.
func RoundTripErr(t testing.TB, rt http.RoundTripper, req *http.Request) error {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	return err
}

// ServerClosedIdleErr returns the error of a PUT (a method net/http does
// not resend by itself) that took an idle keep-alive connection from the
// pool just as the server closed it: the client's read loop sees the end
// of the connection before the request is written.
func ServerClosedIdleErr(t testing.TB) error {
	var mu sync.Mutex
	var serverConns []net.Conn
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.Config.ConnState = func(c net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			serverConns = append(serverConns, c)
			mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	var w connWatch
	base := LoopbackBase(t)
	base.DialContext = w.dialer()
	resp, err := base.RoundTrip(NewRequest(t, "GET", s.URL, nil))
	require.NoError(t, err)
	resp.Body.Close() // empty: the connection is idle in the pool

	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if !info.Reused {
			return
		}
		mu.Lock()
		for _, c := range serverConns {
			c.Close()
		}
		mu.Unlock()
		assert.True(t, w.waitClosed(1), "the client saw the server close the connection")
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	return RoundTripErr(t, base, NewRequest(t, "PUT", s.URL, nil).WithContext(ctx))
}

// WriteOnClosedConnErr returns the error of a POST whose connection a
// proxy cut in the middle of the body: the client's read loop sees the
// reset and closes the connection, and the next write of the body meets
// it closed (net.ErrClosed).
func WriteOnClosedConnErr(t testing.TB) error {
	backend := NewServer(t, retryhttptest.Status(200))
	proxy := NewCutProxy(t, backend.URL, 4<<10, func(int) bool { return true })
	var w connWatch
	base := LoopbackBase(t)
	base.DialContext = w.dialer()
	const chunk = 16 << 10
	body, feed := io.Pipe()
	req := NewRequest(t, "POST", proxy.URL, body)
	req.ContentLength = 2 * chunk
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := feed.Write(make([]byte, chunk)); err != nil { // the proxy passes 4 KiB of it, then resets
			return
		}
		w.waitClosed(1)
		feed.Write(make([]byte, chunk)) // written to a closed connection
		feed.Close()
	}()
	err := RoundTripErr(t, base, req)
	feed.CloseWithError(errors.New("request over"))
	<-done
	require.ErrorIs(t, err, net.ErrClosed, "the write met the closed connection (not the reset itself)")
	return err
}

// ForceClosedErr returns the error of a GET waiting for its response on
// an HTTP/2 connection (to NewH2Server's server) when another request's
// write on that connection fails: net/http then closes the whole
// connection under every stream.
func ForceClosedErr(t testing.TB) error {
	parked := make(chan struct{}, 1)
	s, _, base := NewH2Server(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			parked <- struct{}{}
			<-r.Context().Done()
		}
	}))
	var w connWatch
	base.DialContext = w.dialer()
	waiting := NewRequest(t, "GET", s.URL+"/wait", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := base.RoundTrip(waiting)
		if resp != nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-parked
	conn := w.conn(1)
	require.NotNil(t, conn)
	require.NoError(t, conn.SetWriteDeadline(time.Unix(1, 0))) // every write now fails
	err := RoundTripErr(t, base, NewRequest(t, "GET", s.URL, nil))
	var ne net.Error
	require.ErrorAs(t, err, &ne, "the second request's write failed")
	require.True(t, ne.Timeout())
	return <-errc
}

// NotEstablishedErr returns the error of a GET whose new HTTP/2
// connection (to a ScriptedH2Server) the server closes after net/http
// chose it for the request and before the request's first stream opened.
func NotEstablishedErr(t testing.TB) error {
	closeIt := make(chan struct{})
	s := NewScriptedH2Server(t, func(c *H2Conn) {
		<-closeIt
		c.HangUp()
	})
	var w connWatch
	tr := H2CTransport(t)
	tr.DialContext = w.dialer()
	var once sync.Once
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		once.Do(func() { close(closeIt) })
		assert.True(t, w.waitClosed(1), "the client saw the server close the connection")
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	return RoundTripErr(t, tr, NewRequest(t, "GET", s.URL, nil).WithContext(ctx))
}

// ---- client connections and a cutting proxy ----

// watchedConn is a client connection that reports when it is closed.
type watchedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *watchedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// connWatch records the connections a transport dials, so that a test can
// act on them and wait for the transport to close them.
type connWatch struct {
	mu    sync.Mutex
	conns []*watchedConn
	dial  chan struct{} // closed and replaced on each dial
}

// dialer returns a DialContext that records the connections it makes.
func (w *connWatch) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := &watchedConn{Conn: nc, closed: make(chan struct{})}
		w.mu.Lock()
		w.conns = append(w.conns, c)
		if w.dial != nil {
			close(w.dial)
			w.dial = nil
		}
		w.mu.Unlock()
		return c, nil
	}
}

// conn returns the n-th connection dialed, from 1, waiting for it for a
// bound only a broken test reaches; nil if none came.
func (w *connWatch) conn(n int) *watchedConn {
	timeout := time.After(5 * time.Second)
	for {
		w.mu.Lock()
		if len(w.conns) >= n {
			c := w.conns[n-1]
			w.mu.Unlock()
			return c
		}
		if w.dial == nil {
			w.dial = make(chan struct{})
		}
		dial := w.dial
		w.mu.Unlock()
		select {
		case <-dial:
		case <-timeout:
			return nil
		}
	}
}

// waitClosed reports whether the n-th connection was dialed and closed
// within a bound only a broken test reaches.
func (w *connWatch) waitClosed(n int) bool {
	c := w.conn(n)
	if c == nil {
		return false
	}
	select {
	case <-c.closed:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// CutProxy is a TCP proxy on loopback in front of one backend. It passes
// both directions of each connection through, except that on a connection
// it is told to cut it passes only limit bytes from the client, then
// resets the client's connection and closes the backend's.
type CutProxy struct {
	URL string // the backend's scheme, the proxy's host and port

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// NewCutProxy starts a proxy to the backend at backendURL
// (scheme://host:port) that cuts the n-th connection, from 1, when cut(n)
// says so. It is closed when the test ends.
func NewCutProxy(t testing.TB, backendURL string, limit int64, cut func(n int) bool) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	scheme, backend, _ := strings.Cut(backendURL, "://")
	p := &CutProxy{URL: scheme + "://" + ln.Addr().String()}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for n := 1; ; n++ {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", backend)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() {
				defer p.wg.Done()
				io.Copy(client, server)
				client.Close()
			}()
			go func(cut bool) {
				defer p.wg.Done()
				if !cut {
					io.Copy(server, client)
					server.Close()
					return
				}
				io.CopyN(server, client, limit)
				client.(*net.TCPConn).SetLinger(0)
				client.Close()
				server.Close()
			}(cut(n))
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}
