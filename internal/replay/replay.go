// Package replay gives each attempt of a request its full body: the
// caller's GetBody re-creates it, a small body without one is read into
// memory once, and any other is sent once, its retry allowed only while
// none of it was read.
package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// A LengthError is the error of a request that was not sent because its
// body held more or fewer bytes than its ContentLength (the root package
// wraps it in retryhttp.ErrBodyLength).
type LengthError struct {
	ContentLength int64
	Read          int64 // the body's bytes, or -1 when it held more
}

func (e *LengthError) Error() string {
	if e.Read < 0 {
		return fmt.Sprintf("ContentLength %d, body longer", e.ContentLength)
	}
	return fmt.Sprintf("ContentLength %d, body %d bytes", e.ContentLength, e.Read)
}

// A Kind says how a request body is sent again.
type Kind uint8

// The kinds of bodies.
const (
	None     Kind = iota // no body: nothing to replay
	GetBody              // the caller's GetBody re-creates it; no copy
	Buffered             // read into memory once, replayed from there
	Stream               // sent once; retried only if none of it was read
)

// A Body holds what is needed to give each attempt the full body.
type Body struct {
	Kind   Kind
	buf    []byte        // Buffered
	stream *streamBody   // Stream
	first  io.ReadCloser // GetBody: the caller's body, until the first attempt takes it
}

// Prepare decides how req's body will be replayed and, for a small body
// without GetBody, buffers it. limit is the largest body to buffer (<= 0:
// none). On error the caller's body has been closed and nothing was sent.
//
// Buffering reads the whole body before the first attempt. Should the
// caller's context end meanwhile, the body is closed, which ends a read
// blocked on a pipe or a file, and the context's error is returned.
func Prepare(req *http.Request, limit int64) (Body, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return Body{Kind: None}, nil
	case req.GetBody != nil:
		return Body{Kind: GetBody, first: req.Body}, nil
	case req.ContentLength > 0 && req.ContentLength <= limit:
		ctx := req.Context()
		stop := context.AfterFunc(ctx, func() { req.Body.Close() })
		buf := make([]byte, req.ContentLength+1) // one more byte finds a longer body
		n, err := io.ReadFull(req.Body, buf)
		if stop() { // else the context's end closed it, or is closing it
			req.Body.Close()
		}
		switch {
		case ctx.Err() != nil:
			return Body{}, fmt.Errorf("retryhttp: reading request body: %w", context.Cause(ctx))
		case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
			return Body{}, fmt.Errorf("retryhttp: reading request body: %w", err)
		case int64(n) > req.ContentLength:
			return Body{}, &LengthError{ContentLength: req.ContentLength, Read: -1}
		case int64(n) < req.ContentLength:
			return Body{}, &LengthError{ContentLength: req.ContentLength, Read: int64(n)}
		}
		return Body{Kind: Buffered, buf: buf[:n]}, nil
	default:
		return Body{Kind: Stream, stream: &streamBody{rc: req.Body}}, nil
	}
}

// NeedsCopy reports whether attempt n cannot simply send the caller's request.
func (r *Body) NeedsCopy(n int) bool {
	return r.Kind == Buffered || r.Kind == Stream || (n > 1 && r.Kind == GetBody)
}

// Next returns the body (and GetBody) for attempt n of req.
func (r *Body) Next(req *http.Request, n int) (io.ReadCloser, func() (io.ReadCloser, error), error) {
	switch r.Kind {
	case GetBody:
		if n == 1 {
			r.first = nil // the first attempt's transport closes it
			return req.Body, req.GetBody, nil
		}
		body, err := req.GetBody()
		if err == nil && body == nil {
			err = errors.New("GetBody returned a nil body")
		}
		if err != nil {
			return nil, nil, fmt.Errorf("retryhttp: re-creating request body: %w", err)
		}
		return body, req.GetBody, nil
	case Buffered:
		buf := r.buf
		get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		body, _ := get()
		return body, get, nil
	case Stream:
		r.stream.use()
		return r.stream, nil, nil
	}
	return req.Body, req.GetBody, nil
}

// CanReplay reports whether another attempt can carry the full body, given
// whether the failed attempt provably sent nothing.
func (r *Body) CanReplay(nothingSent bool) bool {
	if r.Kind != Stream {
		return true
	}
	return nothingSent && !r.stream.read.Load()
}

// Finish is called once no attempt will use the body again. A caller's
// body no attempt took (the request ended before its first) is closed.
func (r *Body) Finish() {
	switch {
	case r.Kind == Stream:
		r.stream.release()
	case r.first != nil:
		r.first.Close()
		r.first = nil
	}
}

// streamBody passes a body that cannot be re-created to the base transport
// and remembers whether any byte of it was read. It closes the caller's body
// only when the last attempt's transport closes it, so that a first attempt
// that never reached the server can hand the same, unread body to a second.
type streamBody struct {
	rc   io.ReadCloser
	read atomic.Bool

	mu     sync.Mutex
	uses   int  // attempts handed the body
	closes int  // Close calls from those attempts
	final  bool // no further attempt will be made
	closed bool // rc closed
}

func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if n > 0 {
		s.read.Store(true)
	}
	return n, err
}

func (s *streamBody) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes++
	return s.closeIfDone()
}

func (s *streamBody) use() {
	s.mu.Lock()
	s.uses++
	s.mu.Unlock()
}

func (s *streamBody) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final = true
	s.closeIfDone()
}

// closeIfDone closes the caller's body once it is final and every attempt
// has closed it. Requires s.mu held.
func (s *streamBody) closeIfDone() error {
	if s.closed || !s.final || s.closes < s.uses {
		return nil
	}
	s.closed = true
	return s.rc.Close()
}
