package h3retry

// The test server: quic-go's http3.Server on a loopback UDP socket, with a
// self-signed certificate the test clients trust. The socket is wrapped so
// that a test can drop, delay or hold back what the server sends (a server
// that vanished, a path with latency, a reply that comes late), the server
// can be killed without a word and brought back on the same port with the
// same stateless-reset key, and every request is recorded with the QUIC
// connection it came on.
// TestFaults (faults_test.go) runs it behind a UDP relay (relay_test.go);
// the hedging measurement is meant to reuse it too.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// testCert is a self-signed certificate for 127.0.0.1 and localhost, made
// once per test binary, and a pool that trusts it.
var testCert = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "h3retry test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
})

// faultConn is a UDP socket that can drop, delay or hold back every
// datagram the server sends through it. The server's quic.Transport
// sends through a life of it (see server.stop), which is deliberately not
// an OOBCapablePacketConn, so that quic-go writes through WriteTo.
type faultConn struct {
	conn  *net.UDPConn
	drop  atomic.Bool
	delay atomic.Int64 // nanoseconds
	sends sync.WaitGroup

	holdMu  sync.Mutex
	holding bool
	held    []heldDatagram // in the order sent
}

// heldDatagram is a datagram held back (see hold), and the life that sent
// it.
type heldDatagram struct {
	life *life
	b    []byte
	addr net.Addr
}

func listenUDP(t testing.TB, port int) *faultConn {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	require.NoError(t, err)
	return &faultConn{conn: conn}
}

// hold holds back every datagram sent from now on until release is
// called, which sends them (without the delay) in the order they were
// sent, unless their life has ended by then, and lets the next ones go.
// Calling release more than once does nothing more.
func (c *faultConn) hold() (release func()) {
	c.holdMu.Lock()
	c.holding = true
	c.holdMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.holdMu.Lock()
			defer c.holdMu.Unlock()
			c.holding = false
			for _, d := range c.held {
				_, _ = d.life.send(d.b, d.addr)
			}
			c.held = nil
		})
	}
}

func (c *faultConn) ReadFrom(b []byte) (int, net.Addr, error) { return c.conn.ReadFrom(b) }
func (c *faultConn) LocalAddr() net.Addr                      { return c.conn.LocalAddr() }
func (c *faultConn) SetDeadline(t time.Time) error            { return c.conn.SetDeadline(t) }
func (c *faultConn) SetReadDeadline(t time.Time) error        { return c.conn.SetReadDeadline(t) }
func (c *faultConn) SetWriteDeadline(t time.Time) error       { return c.conn.SetWriteDeadline(t) }

// Close closes the socket once the delayed datagrams are sent; the held
// ones are not.
func (c *faultConn) Close() error {
	c.sends.Wait()
	return c.conn.Close()
}

// A life is the socket as one life of the server (from start to stop)
// sends on it: once it has ended, nothing it sends, or sent and is still
// delayed or held, goes out, even after the server is restarted on the
// socket. quic-go's Transport.Close returns before its last datagrams are
// written: a copy of a closed connection's CONNECTION_CLOSE, which quic-go
// sends again for a packet of that connection it read before closing, is
// queued for a goroutine that Close does not wait for.
type life struct {
	*faultConn

	mu    sync.RWMutex
	ended bool
}

func (l *life) WriteTo(b []byte, addr net.Addr) (int, error) {
	c := l.faultConn
	if c.drop.Load() {
		return len(b), nil
	}
	c.holdMu.Lock()
	if c.holding {
		c.held = append(c.held, heldDatagram{l, append([]byte(nil), b...), addr})
		c.holdMu.Unlock()
		return len(b), nil
	}
	c.holdMu.Unlock()
	if d := time.Duration(c.delay.Load()); d > 0 {
		p := append([]byte(nil), b...)
		c.sends.Add(1)
		time.AfterFunc(d, func() {
			defer c.sends.Done()
			_, _ = l.send(p, addr)
		})
		return len(b), nil
	}
	return l.send(b, addr)
}

// send writes b to addr now, unless the life has ended.
func (l *life) send(b []byte, addr net.Addr) (int, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ended {
		return len(b), nil
	}
	return l.conn.WriteTo(b, addr)
}

// end ends the life: when it returns, no datagram of it is being written,
// and none will be.
func (l *life) end() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}

// seen is a request as the server saw it.
type seen struct {
	Method, Path string
	Conn         int64  // the server's number for its QUIC connection, from 1
	Key          string // Idempotency-Key
	BodySHA256   string // of the body the handler read, hex ("" without one)
	Early        bool   // it arrived before the handshake completed: 0-RTT data
}

// server is an HTTP/3 server on loopback.
type server struct {
	t       testing.TB
	URL     string // https://127.0.0.1:port
	Port    int
	handler http.Handler
	quicCfg *quic.Config
	key     quic.StatelessResetKey

	pc    *faultConn
	life  *life // of pc, that tr sends through
	tr    *quic.Transport
	ln    *quic.EarlyListener
	srv   *http3.Server
	done  chan struct{} // closed when ServeListener returned
	conns atomic.Int64  // QUIC connections served, over the server's lives

	mu       sync.Mutex
	requests []seen
	closed   bool
}

type connKey struct{}

// quicConnKey holds the request's QUIC connection in its context, for a
// handler that closes it (see quicConnOf).
type quicConnKey struct{}

// quicConnOf returns the QUIC connection a request came on.
func quicConnOf(r *http.Request) *quic.Conn {
	c, _ := r.Context().Value(quicConnKey{}).(*quic.Conn)
	return c
}

// serverOption changes the quic.Config of a server before it starts.
type serverOption func(*quic.Config)

// newServer starts an HTTP/3 server with handler h on a port of its own,
// closed when the test ends. The handler's requests are recorded (see
// Requests) before h sees them; their bodies are read by the recorder, and
// h gets them again.
func newServer(t testing.TB, h http.HandlerFunc, opts ...serverOption) *server {
	t.Helper()
	s := &server{t: t, handler: h, quicCfg: &quic.Config{MaxIdleTimeout: 5 * time.Second}}
	for _, o := range opts {
		o(s.quicCfg)
	}
	_, _ = rand.Read(s.key[:])
	s.start(listenUDP(t, 0))
	s.Port = s.pc.LocalAddr().(*net.UDPAddr).Port
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", s.Port)
	t.Cleanup(s.Close)
	return s
}

// start serves on pc with a new quic.Transport and http3.Server.
func (s *server) start(pc *faultConn) {
	s.t.Helper()
	cert, _ := testCert()
	s.pc = pc
	s.life = &life{faultConn: pc}
	s.tr = &quic.Transport{Conn: s.life, StatelessResetKey: &s.key}
	tlsConf := http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}})
	ln, err := s.tr.ListenEarly(tlsConf, s.quicCfg)
	require.NoError(s.t, err)
	s.ln = ln
	s.srv = &http3.Server{
		Handler: http.HandlerFunc(s.record),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			ctx = context.WithValue(ctx, quicConnKey{}, c)
			return context.WithValue(ctx, connKey{}, s.conns.Add(1))
		},
	}
	s.done = make(chan struct{})
	go func(srv *http3.Server, done chan struct{}) {
		defer close(done)
		_ = srv.ServeListener(ln)
	}(s.srv, s.done)
}

func (s *server) record(w http.ResponseWriter, r *http.Request) {
	rec := seen{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"),
		Early: r.TLS != nil && !r.TLS.HandshakeComplete}
	rec.Conn, _ = r.Context().Value(connKey{}).(int64)
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		if err == nil && len(b) > 0 {
			rec.BodySHA256 = testutil.SHA256Hex(b)
		}
		// The handler reads what arrived, and then the error that cut it
		// (the client reset the stream mid-body): a cut body must not read
		// as a whole one.
		var rest io.Reader = bytes.NewReader(nil)
		if err != nil {
			rest = iotest.ErrReader(err)
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), rest))
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	h := s.handler
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// setHandler replaces the server's handler.
func (s *server) setHandler(h http.HandlerFunc) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

// Requests returns the requests seen so far.
func (s *server) Requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.requests...)
}

// stop ends the server's life without a word to its clients: nothing it
// sends goes out from now on (its CONNECTION_CLOSE neither), even after
// restart.
func (s *server) stop() {
	s.life.end()
	_ = s.srv.Close()
	_ = s.ln.Close()
	_ = s.tr.Close()
	<-s.done
}

// restart brings a stopped server back on the same socket with the same
// stateless-reset key, and none of its connections: a new life.
func (s *server) restart() {
	s.start(s.pc)
}

// reopen closes the server and starts it again on a new socket on the same
// port, as a process that restarts does.
func (s *server) reopen() error {
	s.Close()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: s.Port})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.closed = false
	s.mu.Unlock()
	s.start(&faultConn{conn: conn})
	return nil
}

// Close stops the server, closing its connections (CONNECTION_CLOSE with
// H3_NO_ERROR), and its socket.
func (s *server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	_ = s.srv.Close()
	_ = s.ln.Close()
	_ = s.tr.Close()
	<-s.done
	_ = s.pc.Close()
}

// clientOption changes a client's http3.Transport before its first use.
type clientOption func(*http3.Transport)

// newClient returns an http3.Transport that trusts the test certificate,
// with short timeouts, closed when the test ends.
func newClient(t testing.TB, opts ...clientOption) *http3.Transport {
	t.Helper()
	_, pool := testCert()
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		QUICConfig: &quic.Config{
			HandshakeIdleTimeout: 2 * time.Second,
			MaxIdleTimeout:       5 * time.Second,
		},
		DisableCompression: true,
	}
	for _, o := range opts {
		o(tr)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// get sends a GET through rt and returns the response's status and body.
func get(t testing.TB, rt http.RoundTripper, url string) (*http.Response, string, error) {
	t.Helper()
	return do(t, rt, http.MethodGet, url, "")
}

// do sends a request through rt and reads its response whole.
func do(t testing.TB, rt http.RoundTripper, method, url, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, bodyOf(body))
	require.NoError(t, err)
	return send(rt, req)
}

func send(rt http.RoundTripper, req *http.Request) (*http.Response, string, error) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func bodyOf(s string) io.Reader {
	if s == "" {
		return nil
	}
	return bytes.NewReader([]byte(s))
}

var errHijack = errors.New("http3: the response writer is no HTTPStreamer")

// resetsThenOK returns a handler that resets the stream of the first n
// requests (counted in *count, which the test may set) with code, and
// answers every later one 200 "ok".
func resetsThenOK(t testing.TB, count *atomic.Int32, n int32, code http3.ErrCode) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if count.Add(1) <= n {
			assert.NoError(t, resetStream(w, code))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// resetStream resets the request's stream from a handler with code, both
// ways, as a server that gives up on a request does.
func resetStream(w http.ResponseWriter, code http3.ErrCode) error {
	hs, ok := w.(http3.HTTPStreamer)
	if !ok {
		return errHijack
	}
	str, err := hs.HTTPStream()
	if err != nil {
		return err
	}
	str.CancelRead(quic.StreamErrorCode(code))
	str.CancelWrite(quic.StreamErrorCode(code))
	return nil
}
