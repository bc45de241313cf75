package retryhttp_test

// The scaffolding of the tests that use the package only as its users do
// (package retryhttp_test): a scripted in-memory base for fake time, and
// response bodies that record how they were read and closed.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// script is an in-memory base transport: its n-th call (from 1) returns
// answer(n, req). It keeps every request it got, and reads and closes the
// request body of each call, as a RoundTripper must.
type script struct {
	answer func(n int, req *http.Request) (*http.Response, error)

	mu   sync.Mutex
	reqs []*http.Request
}

func (b *script) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	n := len(b.reqs)
	b.mu.Unlock()
	resp, err := b.answer(n, req)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return resp, err
}

// attempts returns the number of calls so far.
func (b *script) attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reqs)
}

// request returns the request of call n (from 1).
func (b *script) request(n int) *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reqs[n-1]
}

// baseFunc is a base transport that is a function.
type baseFunc func(*http.Request) (*http.Response, error)

func (f baseFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// reset fails a call as a connection reset by the server: a transient
// failure, retried for an idempotent request.
func reset(int, *http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// body is a response body that counts its Close calls.
type body struct {
	io.Reader
	closes atomic.Int32
}

func (b *body) Close() error {
	b.closes.Add(1)
	return nil
}

// reply answers req with status code and text as its body, which it
// returns too, to see it closed.
func reply(req *http.Request, code int, text string) (*http.Response, *body) {
	b := &body{Reader: strings.NewReader(text)}
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Header: http.Header{}, Body: b, ContentLength: int64(len(text)), Request: req,
	}, b
}

// stalledBody is a response body that sends nothing until it is closed:
// its reads block until then, and then fail. It counts its Close calls.
type stalledBody struct {
	closes atomic.Int32
	once   sync.Once
	closed chan struct{}
}

func newStalledBody() *stalledBody { return &stalledBody{closed: make(chan struct{})} }

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *stalledBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() { close(b.closed) })
	return nil
}

// get returns a GET of url under ctx.
func get(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// readAll reads resp's body whole and closes it.
func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
