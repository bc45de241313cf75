package testutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// RoundTripFunc adapts a function to http.RoundTripper.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// BackoffFunc adapts a function to retryhttp.Backoff.
type BackoffFunc func(n int, prev time.Duration, u float64) time.Duration

// Delay calls f(n, prev, u).
func (f BackoffFunc) Delay(n int, prev time.Duration, u float64) time.Duration { return f(n, prev, u) }

// IdleRecorder is a base that records its CloseIdleConnections calls, and
// sends requests through RoundTripper.
type IdleRecorder struct {
	http.RoundTripper
	closes atomic.Int32
}

// CloseIdleConnections records the call.
func (r *IdleRecorder) CloseIdleConnections() { r.closes.Add(1) }

// Closes returns how many times CloseIdleConnections was called.
func (r *IdleRecorder) Closes() int { return int(r.closes.Load()) }

// An Answer answers the n-th call (from 1) to a Base.
type Answer func(n int, req *http.Request) (*http.Response, error)

// Base is an in-memory base transport: a scripted server that needs no
// network, for tests in fake time (testing/synctest) and for outcomes a
// real server cannot produce on demand. Its n-th call (from 1) returns
// Answer(n, req); a nil Answer is 200 "ok" to every call.
//
// It records each attempt as the server of retryhttptest does, so tests
// assert on both alike: method, path, header, body length and SHA-256 (or
// the error that cut the body short), and the time the attempt reached it
// (fake time under synctest). It reads and closes the request body, as a
// RoundTripper must, but only of an attempt that Answer does not fail: a
// failed attempt stands for one that failed before its body was sent (a
// refused dial), so its body is closed unread and recorded as empty.
type Base struct {
	Answer Answer

	mu   sync.Mutex
	seen []retryhttptest.Request
	reqs []*http.Request // the requests themselves, as the base got them
}

// RoundTrip records the attempt and answers it.
func (b *Base) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.seen = append(b.seen, retryhttptest.Request{
		Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery, Proto: req.Proto,
		Header: req.Header.Clone(), BodySHA256: SHA256Hex(nil), Time: time.Now(),
	})
	b.reqs = append(b.reqs, req)
	n := len(b.seen)
	b.mu.Unlock()

	var resp *http.Response
	var err error
	if b.Answer != nil {
		resp, err = b.Answer(n, req)
	} else {
		resp = Response(req, http.StatusOK, nil, "ok")
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

// Requests returns the record of every attempt so far.
func (b *Base) Requests() []retryhttptest.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]retryhttptest.Request, len(b.seen))
	for i, r := range b.seen {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Request returns the request of attempt n (from 1) as the base got it.
func (b *Base) Request(n int) *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reqs[n-1]
}

// Attempts returns the number of attempts that reached the base.
func (b *Base) Attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

// Calls returns when each attempt reached the base.
func (b *Base) Calls() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Time, len(b.seen))
	for i, r := range b.seen {
		out[i] = r.Time
	}
	return out
}

// Gap returns the time between the starts of attempts n and n+1.
func (b *Base) Gap(t testing.TB, n int) time.Duration {
	t.Helper()
	calls := b.Calls()
	require.Greater(t, len(calls), n, "attempts made")
	return calls[n].Sub(calls[n-1])
}

// Sent returns the values of header name on every attempt.
func (b *Base) Sent(name string) [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([][]string, len(b.seen))
	for i, r := range b.seen {
		out[i] = r.Header.Values(name)
	}
	return out
}

// ---- answers ----

// Response is a response to req with the given status, header and body,
// as net/http's transport makes it: over HTTP/1.1, and with http.NoBody
// for an empty body.
func Response(req *http.Request, code int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	resp := &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: http.NoBody, ContentLength: int64(len(body)), Request: req,
	}
	if body != "" {
		resp.Body = io.NopCloser(strings.NewReader(body))
	}
	return resp
}

// Statuses answers the n-th call with codes[n-1] (the last repeats) and the
// body "attempt n".
func Statuses(codes ...int) Answer {
	return func(n int, req *http.Request) (*http.Response, error) {
		return Response(req, codes[min(n, len(codes))-1], nil, fmt.Sprintf("attempt %d", n)), nil
	}
}

// OnceThenOK answers the first call with first, and every later call with
// 200 "ok".
func OnceThenOK(first Answer) Answer {
	return func(n int, req *http.Request) (*http.Response, error) {
		if n == 1 {
			return first(n, req)
		}
		return Response(req, http.StatusOK, nil, "ok"), nil
	}
}

// ThenOK answers the first call with status code, header and the body
// "busy", and every later call with 200 "ok".
func ThenOK(code int, header http.Header) Answer {
	return OnceThenOK(func(_ int, req *http.Request) (*http.Response, error) {
		return Response(req, code, header, "busy"), nil
	})
}

// FailsOnce answers the first call with err, and every later call with
// 200 "ok".
func FailsOnce(err error) Answer {
	return OnceThenOK(func(int, *http.Request) (*http.Response, error) { return nil, err })
}

// ErrReset is the error of a connection the server reset under the
// request, as net/http returns it: a transient failure after the request
// may have been sent.
func ErrReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// ErrRefused is the error of a refused dial, as net/http returns it:
// nothing was sent.
func ErrRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// ResetByPeer fails every call as a connection reset by the server.
func ResetByPeer(int, *http.Request) (*http.Response, error) { return nil, ErrReset() }

// Refused fails every call as a refused dial: nothing was sent.
func Refused(int, *http.Request) (*http.Response, error) { return nil, ErrRefused() }

// Hang blocks each call until its context ends, and then fails as net/http
// does, with the context's cause.
func Hang(_ int, req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, fmt.Errorf("net/http: request canceled: %w", context.Cause(req.Context()))
}
