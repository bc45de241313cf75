package testutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// NewServer starts a retryhttptest server on loopback that plays the steps
// in sequence (the last repeats), and closes it when the test ends.
func NewServer(t testing.TB, steps ...retryhttptest.Step) *retryhttptest.Server {
	t.Helper()
	s := retryhttptest.NewServer(retryhttptest.Sequence(steps...))
	t.Cleanup(s.Close)
	return s
}

// Answers returns a step per status code, each with a body naming its
// status and attempt, e.g. "status 503 on attempt 1".
func Answers(codes ...int) []retryhttptest.Step {
	steps := make([]retryhttptest.Step, len(codes))
	for i, code := range codes {
		steps[i] = retryhttptest.Status(code).WithBody(fmt.Sprintf("status %d on attempt %d", code, i+1))
	}
	return steps
}

// NewTLSServer returns a loopback HTTPS server answering 200, whose
// certificate no default client trusts; the handshakes that fail on it are
// not logged.
func NewTLSServer(t testing.TB) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Config.ErrorLog = DiscardLog()
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// ClosedAddr returns a loopback address nothing listens on: dialing it is
// refused.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// LoopbackBase returns a fresh pooled transport (go-cleanhttp's) whose
// idle connections are closed when the test ends, so that goleak sees no
// connection goroutines.
func LoopbackBase(t testing.TB) *http.Transport {
	base := cleanhttp.DefaultPooledTransport()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// RefuseFirstDial makes base's first dial go to a loopback port nobody
// listens on, so the first attempt is refused before anything is sent, and
// returns the count of dials.
func RefuseFirstDial(t testing.TB, base *http.Transport) *atomic.Int32 {
	t.Helper()
	closed := ClosedAddr(t)
	var dials atomic.Int32
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 {
			addr = closed
		}
		return d.DialContext(ctx, network, addr)
	}
	return &dials
}

// DiscardLog returns a logger for test servers whose expected errors (cut
// connections, failed handshakes) should not clutter the output.
func DiscardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a Logger's).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// AbortListener records the TCP connections it accepts, so that Abort can
// reset them all.
type AbortListener struct {
	net.Listener

	mu       sync.Mutex
	conns    []*net.TCPConn
	accepted int
}

// Accept accepts a connection and records it.
func (l *AbortListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c.(*net.TCPConn))
		l.accepted++
		l.mu.Unlock()
	}
	return c, err
}

// Count returns the connections accepted so far.
func (l *AbortListener) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// Abort resets every connection accepted so far and not yet aborted: a TCP
// RST, with no TLS close_notify and no HTTP/2 GOAWAY, as when a server
// process dies or a load balancer drops its connections.
func (l *AbortListener) Abort() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.SetLinger(0)
		c.Close()
	}
}

// ResetConn takes over the connection of w and resets it (a TCP RST, with
// no TLS close_notify), as a server process that dies under the request
// does. It needs an HTTP/1.1 server, whose connections can be hijacked.
func ResetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err) // an HTTP/1.1 server can always hijack
	}
	c := conn
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	conn.Close()
}

// NewH2Server starts net/http's server with HTTP/2 over TLS on loopback,
// serving h with no error log, on an AbortListener; and returns it with
// the listener and a base transport that trusts it and speaks HTTP/2 to
// it. Both are closed when the test ends.
func NewH2Server(t testing.TB, h http.Handler) (*httptest.Server, *AbortListener, *http.Transport) {
	s := httptest.NewUnstartedServer(h)
	ln := &AbortListener{Listener: s.Listener}
	s.Listener = ln
	s.EnableHTTP2 = true
	s.Config.ErrorLog = DiscardLog()
	s.StartTLS()
	t.Cleanup(s.Close)
	base := s.Client().Transport.(*http.Transport).Clone()
	base.ForceAttemptHTTP2 = true
	t.Cleanup(base.CloseIdleConnections)
	return s, ln, base
}
