package retryhttp

// The scaffolding shared by the package's tests: an in-memory base
// transport for fake time (fakeBase) with the answers it is scripted with,
// a recorder of a Transport's hooks, a request body that records its Close,
// and the loopback servers and transports of the network tests, which use
// the scriptable server of package retryhttptest.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// ---- the in-memory base ----

// fakeBase is an in-memory base transport: a scripted server that needs no
// network, for tests in fake time (testing/synctest) and for outcomes a
// real server cannot produce on demand. Its n-th call (from 1) returns
// answer(n, req); a nil answer is 200 "ok" to every call.
//
// It records each attempt as the server of retryhttptest does, so tests
// assert on both alike: method, path, header, body length and SHA-256 (or
// the error that cut the body short), and the time the attempt reached it
// (fake time under synctest). It reads and closes the request body, as a
// RoundTripper must, but only of an attempt that answer does not fail: a
// failed attempt stands for one that failed before its body was sent (a
// refused dial), so its body is closed unread and recorded as empty.
type fakeBase struct {
	answer func(n int, req *http.Request) (*http.Response, error)

	mu   sync.Mutex
	seen []retryhttptest.Request
	reqs []*http.Request // the requests themselves, as the base got them
}

func (b *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.seen = append(b.seen, retryhttptest.Request{
		Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery, Proto: req.Proto,
		Header: req.Header.Clone(), BodySHA256: sha256Hex(nil), Time: time.Now(),
	})
	b.reqs = append(b.reqs, req)
	n := len(b.seen)
	b.mu.Unlock()

	var resp *http.Response
	var err error
	if b.answer != nil {
		resp, err = b.answer(n, req)
	} else {
		resp = response(req, http.StatusOK, nil, "ok")
	}
	if req.Body == nil {
		return resp, err
	}
	if err != nil {
		req.Body.Close()
		return resp, err
	}
	sum := sha256.New()
	size, berr := io.Copy(sum, req.Body)
	req.Body.Close()
	if berr == nil && req.ContentLength > 0 && size != req.ContentLength {
		berr = fmt.Errorf("body of %d bytes, ContentLength %d", size, req.ContentLength)
	}
	b.mu.Lock()
	rec := &b.seen[n-1]
	rec.BodyLen, rec.BodySHA256, rec.BodyErr = size, hex.EncodeToString(sum.Sum(nil)), berr
	b.mu.Unlock()
	return resp, err
}

// requests returns the record of every attempt so far.
func (b *fakeBase) requests() []retryhttptest.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]retryhttptest.Request, len(b.seen))
	for i, r := range b.seen {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// attempts returns the number of attempts that reached the base.
func (b *fakeBase) attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

// calls returns when each attempt reached the base.
func (b *fakeBase) calls() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Time, len(b.seen))
	for i, r := range b.seen {
		out[i] = r.Time
	}
	return out
}

// gap returns the time between the starts of attempts n and n+1.
func (b *fakeBase) gap(t *testing.T, n int) time.Duration {
	t.Helper()
	calls := b.calls()
	require.Greater(t, len(calls), n, "attempts made")
	return calls[n].Sub(calls[n-1])
}

// sent returns the values of header name on every attempt.
func (b *fakeBase) sent(name string) [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([][]string, len(b.seen))
	for i, r := range b.seen {
		out[i] = r.Header.Values(name)
	}
	return out
}

// ---- answers for a fakeBase ----

// response is a response to req with the given status, header and body.
func response(req *http.Request, code int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header: header, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}

// statuses answers the n-th call with codes[n-1] (the last repeats) and the
// body "attempt n".
func statuses(codes ...int) func(int, *http.Request) (*http.Response, error) {
	return func(n int, req *http.Request) (*http.Response, error) {
		return response(req, codes[min(n, len(codes))-1], nil, fmt.Sprintf("attempt %d", n)), nil
	}
}

// thenOK answers the first call with status code, header and the body
// "busy", and every later call with 200 "ok".
func thenOK(code int, header http.Header) func(int, *http.Request) (*http.Response, error) {
	return func(n int, req *http.Request) (*http.Response, error) {
		if n == 1 {
			return response(req, code, header, "busy"), nil
		}
		return response(req, http.StatusOK, nil, "ok"), nil
	}
}

// resetByPeer fails every call as a connection reset by the server.
func resetByPeer(int, *http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// refused fails every call as a refused dial: nothing was sent.
func refused(int, *http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// hang blocks each call until its context ends, and then fails as net/http
// does, with the context's cause.
func hang(_ int, req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, fmt.Errorf("net/http: request canceled: %w", context.Cause(req.Context()))
}

// ---- hooks, requests and bodies ----

// hookLog records the events of a Transport's OnRetry and OnGiveUp hooks.
type hookLog struct {
	mu      sync.Mutex
	retries []RetryEvent
	giveUps []GiveUpEvent
}

// watch makes h record tr's hooks, and returns h.
func (h *hookLog) watch(tr *Transport) *hookLog {
	tr.OnRetry = h.onRetry
	tr.OnGiveUp = h.onGiveUp
	return h
}

func (h *hookLog) onRetry(e *RetryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retries = append(h.retries, *e)
}

func (h *hookLog) onGiveUp(e *GiveUpEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.giveUps = append(h.giveUps, *e)
}

// reasons returns the reasons of the give-ups, in order.
func (h *hookLog) reasons() []Reason {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rs []Reason
	for _, e := range h.giveUps {
		rs = append(rs, e.Reason)
	}
	return rs
}

// fakeTransport returns a Transport over base with policy p, the default
// budget, every random sample fixed at u, and its hooks recorded. (Its
// tests send requests alone, which the default budget gives exactly their
// policy, as UnlimitedBudget would: issue 31.)
func fakeTransport(base http.RoundTripper, p Policy, u float64) (*Transport, *hookLog) {
	tr := &Transport{Base: base, Policy: p, rand: func() float64 { return u }}
	return tr, new(hookLog).watch(tr)
}

// keysOn returns a Transport over base that retries at once, without a
// budget, with the given idempotency keys (nil: keys off).
func keysOn(base http.RoundTripper, keys *IdempotencyKeys) *Transport {
	return &Transport{
		Base:   base,
		Policy: Policy{Backoff: Constant(0), IdempotencyKeys: keys},
		Budget: UnlimitedBudget(),
	}
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

// newGet returns a GET of an in-memory URL with context ctx.
func newGet(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	return newRequest(t, http.MethodGet, "http://api.test/things", nil).WithContext(ctx)
}

// roundTrip sends req through rt and checks the half of the RoundTripper
// contract that holds on every path: exactly one of resp and err is nil.
func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if (resp == nil) == (err == nil) {
		t.Fatalf("RoundTrip returned resp %v and err %v: exactly one must be nil", resp, err)
	}
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// readBody reads and closes a response body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// payload returns n bytes of deterministic noise: a resend that dropped,
// repeated or reordered any part of it would hash differently.
func payload(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// sha256Hex is the body digest of a retryhttptest.Request.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ---- loopback ----

// newServer starts a retryhttptest server on loopback that plays the steps
// in sequence (the last repeats), and closes it when the test ends.
func newServer(t *testing.T, steps ...retryhttptest.Step) *retryhttptest.Server {
	t.Helper()
	s := retryhttptest.NewServer(retryhttptest.Sequence(steps...))
	t.Cleanup(s.Close)
	return s
}

// answers returns a step per status code, each with a body naming its
// status and attempt, e.g. "status 503 on attempt 1".
func answers(codes ...int) []retryhttptest.Step {
	steps := make([]retryhttptest.Step, len(codes))
	for i, code := range codes {
		steps[i] = retryhttptest.Status(code).WithBody(fmt.Sprintf("status %d on attempt %d", code, i+1))
	}
	return steps
}

// newTLSServer returns a loopback HTTPS server answering 200, whose
// certificate no default client trusts; the handshakes that fail on it are
// not logged.
func newTLSServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// closedAddr returns a loopback address nothing listens on: dialing it is
// refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// newLoopbackBase returns a fresh pooled transport whose idle connections
// are closed when the test ends (so goleak sees no connection goroutines).
func newLoopbackBase(t *testing.T) *http.Transport {
	base := cleanhttp.DefaultPooledTransport()
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// refuseFirstDial makes base's first dial go to a loopback port nobody
// listens on, so the first attempt is refused before anything is sent, and
// returns the count of dials.
func refuseFirstDial(t *testing.T, base *http.Transport) *atomic.Int32 {
	t.Helper()
	closed := closedAddr(t)
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

// newTestTransport returns a Transport over a fresh loopback base with policy
// p; a nil p.Backoff means no wait between attempts, and the budget is
// unlimited so that it never decides a test's outcome.
func newTestTransport(t *testing.T, p Policy) *Transport {
	t.Helper()
	if p.Backoff == nil {
		p.Backoff = Constant(0)
	}
	return &Transport{Base: newLoopbackBase(t), Policy: p, Budget: UnlimitedBudget()}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// discardLog returns a logger for test servers whose expected errors (cut
// connections, failed handshakes) should not clutter the output.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// syncBuffer is a bytes.Buffer safe for concurrent writers (a Logger's).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
