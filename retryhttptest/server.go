package retryhttptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// A Server is an HTTP server on the loopback interface that answers each
// request with the next step of a script and records every request it
// receives. Its methods are safe for simultaneous use.
type Server struct {
	// URL is the base URL of the server, of the form http://ipaddr:port
	// (https:// for NewTLSServer) with no trailing slash.
	URL string

	ts     *httptest.Server
	mux    *http.ServeMux // routes, looked up but never served
	done   chan struct{}  // closed when Close begins: steps stop waiting
	close  sync.Once
	nconns atomic.Int64

	mu      sync.Mutex
	main    *player
	reqs    []Request
	changed chan struct{} // closed and replaced when a request is recorded
}

// NewServer starts and returns a server speaking HTTP/1.1 in the clear that
// plays script for every request no route matches. The caller should call
// Close when finished, e.g. with t.Cleanup(srv.Close).
func NewServer(script Script) *Server {
	s := newServer(script)
	s.ts.Start()
	s.URL = s.ts.URL
	return s
}

// NewTLSServer starts and returns a server speaking HTTPS, with a
// certificate for 127.0.0.1 trusted by Server.Client, that serves HTTP/2
// to clients that offer it (as that client does) and HTTP/1.1 to others.
// Over HTTP/2, Step.GoAway sends a GOAWAY frame.
//
// To test a retrying transport over TLS, give it Server.Client's transport
// as its base.
func NewTLSServer(script Script) *Server {
	s := newServer(script)
	s.ts.EnableHTTP2 = true
	s.ts.StartTLS()
	s.URL = s.ts.URL
	return s
}

func newServer(script Script) *Server {
	s := &Server{
		mux:     http.NewServeMux(),
		done:    make(chan struct{}),
		main:    &player{script: script},
		changed: make(chan struct{}),
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.ts.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &conn{id: int(s.nconns.Add(1)), nc: c})
	}
	return s
}

// Route makes script answer the requests that match pattern, instead of
// the server's own script. Patterns are those of http.ServeMux: "/pay"
// matches that path only, "/items/" the whole tree under it, and
// "POST /pay" only POST requests to /pay; the most specific pattern wins.
// A request no route matches (including one that ServeMux would redirect)
// gets the server's script.
//
// Route may be called while the server runs. Like http.ServeMux.Handle, it
// panics if pattern is invalid or conflicts with a pattern already routed.
func (s *Server) Route(pattern string, script Script) {
	s.mux.Handle(pattern, &route{p: &player{script: script, pattern: pattern}})
}

// route marks a player in the ServeMux. The server only looks routes up
// and plays their scripts itself, so ServeHTTP is never called.
type route struct{ p *player }

func (*route) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "retryhttptest: route served outside its server", http.StatusInternalServerError)
}

// Client returns an HTTP client for the server, with a Transport of its
// own; for a server of NewTLSServer, it trusts the server's certificate and
// speaks HTTP/2. Close closes its idle connections.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close releases every step that is waiting (Hang, After, SlowBody), closes
// all connections, whether idle or not, and waits until every request
// handler of the server has returned. Requests and Conns still answer
// after Close. Close may be called more than once.
func (s *Server) Close() {
	s.close.Do(func() {
		close(s.done)
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// Conns returns the number of connections the server has accepted.
// Compared with the number of requests, it shows whether a client reuses
// its connections.
func (s *Server) Conns() int { return int(s.nconns.Load()) }

// Requests returns a copy of the record of the requests the server has
// received, in the order their steps were taken.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// WaitRequests blocks until the server has received at least n requests
// (read their bodies and begun their steps), ctx is done, or the server is
// closed. It returns nil in the first case, ctx.Err() in the second and
// http.ErrServerClosed in the third. It lets a test act while a step is in
// progress, e.g. cancel a request that Hang holds.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, changed := len(s.reqs), s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return http.ErrServerClosed
		}
	}
}

// A Request is the server's record of one request it received.
type Request struct {
	Method     string
	Path       string      // the URL's path, e.g. "/items/3"
	RawQuery   string      // the URL's query, without '?'
	Proto      string      // "HTTP/1.1" or "HTTP/2.0"
	Header     http.Header // the request's header fields (Host is not among them)
	BodyLen    int64       // bytes of body received
	BodySHA256 string      // hex SHA-256 digest of the body received
	BodyErr    error       // the error that ended the body early, or nil
	Time       time.Time   // when the request's header had arrived
	Conn       int         // the connection: 1 for the first the server accepted, and so on
	RemoteAddr string      // the client's address of that connection
	Route      string      // the pattern of the route that answered; "" for the script
	Step       int         // the step that answered it: its index in the script, from 0
}

// connKey is the context key of the connection's *conn.
type connKey struct{}

// conn identifies an accepted connection.
type conn struct {
	id int
	nc net.Conn
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	p := s.main
	if h, _ := s.mux.Handler(r); h != nil {
		if rt, ok := h.(*route); ok {
			p = rt.p
		}
	}
	s.mu.Lock()
	i, step := p.next()
	s.mu.Unlock()
	h := sha256.New()
	var in io.Reader = io.TeeReader(r.Body, h)
	if step.upload != uploadWhole {
		in = io.LimitReader(in, step.uploadAt)
	}
	body, berr := io.ReadAll(in)
	rec := Request{
		Method:     r.Method,
		Path:       r.URL.Path,
		RawQuery:   r.URL.RawQuery,
		Proto:      r.Proto,
		Header:     r.Header.Clone(),
		BodyLen:    int64(len(body)),
		BodySHA256: hex.EncodeToString(h.Sum(nil)),
		BodyErr:    berr,
		Time:       arrived,
		RemoteAddr: r.RemoteAddr,
		Route:      p.pattern,
	}
	c, _ := r.Context().Value(connKey{}).(*conn)
	if c != nil {
		rec.Conn = c.id
	}

	s.mu.Lock()
	rec.Step = i
	s.reqs = append(s.reqs, rec)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()

	if berr != nil {
		abort() // the client is gone or broke off
	}
	switch step.upload {
	case uploadReset:
		reset(c)
		abort()
	case uploadStall:
		pause(r, time.Duration(math.MaxInt64), s.done)
		abort()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	play(w, r, step, c, s.done)
}
