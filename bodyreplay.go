package retryhttp

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

// ErrBodyLength is wrapped by the error of a request that was not sent
// because its body held more or fewer bytes than its ContentLength.
var ErrBodyLength = errors.New("retryhttp: request body length differs from ContentLength")

// bodyKind says how a request body is sent again.
type bodyKind uint8

const (
	bodyNone     bodyKind = iota // no body: nothing to replay
	bodyGetBody                  // the caller's GetBody re-creates it; no copy
	bodyBuffered                 // read into memory once, replayed from there
	bodyStream                   // sent once; retried only if none of it was read
)

// replay holds what is needed to give each attempt the full body.
type replay struct {
	kind   bodyKind
	buf    []byte      // bodyBuffered
	stream *streamBody // bodyStream
}

// prepareBody decides how req's body will be replayed and, for a small body
// without GetBody, buffers it. limit is the largest body to buffer (<= 0:
// none). On error the caller's body has been closed and nothing was sent.
//
// Buffering reads the whole body before the first attempt. Should the
// caller's context end meanwhile, the body is closed, which ends a read
// blocked on a pipe or a file, and the context's error is returned.
func prepareBody(req *http.Request, limit int64) (replay, error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return replay{kind: bodyNone}, nil
	case req.GetBody != nil:
		return replay{kind: bodyGetBody}, nil
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
			return replay{}, fmt.Errorf("retryhttp: reading request body: %w", context.Cause(ctx))
		case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
			return replay{}, fmt.Errorf("retryhttp: reading request body: %w", err)
		case int64(n) > req.ContentLength:
			return replay{}, fmt.Errorf("%w (ContentLength %d, body longer)", ErrBodyLength, req.ContentLength)
		case int64(n) < req.ContentLength:
			return replay{}, fmt.Errorf("%w (ContentLength %d, body %d bytes)", ErrBodyLength, req.ContentLength, n)
		}
		return replay{kind: bodyBuffered, buf: buf[:n]}, nil
	default:
		return replay{kind: bodyStream, stream: &streamBody{rc: req.Body}}, nil
	}
}

// needsCopy reports whether attempt n cannot simply send the caller's request.
func (r *replay) needsCopy(n int) bool {
	return r.kind == bodyBuffered || r.kind == bodyStream || (n > 1 && r.kind == bodyGetBody)
}

// next returns the body (and GetBody) for attempt n of req.
func (r *replay) next(req *http.Request, n int) (io.ReadCloser, func() (io.ReadCloser, error), error) {
	switch r.kind {
	case bodyGetBody:
		if n == 1 {
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
	case bodyBuffered:
		buf := r.buf
		get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		body, _ := get()
		return body, get, nil
	case bodyStream:
		r.stream.use()
		return r.stream, nil, nil
	}
	return req.Body, req.GetBody, nil
}

// canReplay reports whether another attempt can carry the full body, given
// whether the failed attempt provably sent nothing.
func (r *replay) canReplay(nothingSent bool) bool {
	if r.kind != bodyStream {
		return true
	}
	return nothingSent && !r.stream.read.Load()
}

// finish is called once no attempt will use the body again.
func (r *replay) finish() {
	if r.kind == bodyStream {
		r.stream.release()
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
