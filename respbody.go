package retryhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// Response bodies: what the caller gets (released with the attempt's
// context, or read whole into memory), and what becomes of a failed
// attempt's (drained with a cut-off, or kept while a retry waits).

// completeResponse gives a response from the base what the caller may rely
// on, as http.Transport's have them: a body (http.Client tolerates a nil
// one; so do we) and the request it answers.
func completeResponse(resp *http.Response, req *http.Request) {
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	if resp.Request == nil {
		resp.Request = req
	}
}

// releaseBody calls release once, when the body is closed or read to its end.
type releaseBody struct {
	rc      io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.once.Do(b.release)
	}
	return n, err
}

// abort cancels the attempt's context, which ends a read in progress.
func (b *releaseBody) abort() { b.once.Do(b.release) }

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.release)
	return err
}

// releaseRWBody is a releaseBody over the read-write body of a 101
// Switching Protocols response.
type releaseRWBody struct {
	*releaseBody
	w io.Writer
}

func (b *releaseRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// releaseWith makes rb, a releaseBody over resp's body, resp's body:
// writable too when it is the read-write body of a 101 Switching Protocols
// (net/http's promise for an upgraded connection).
func releaseWith(resp *http.Response, rb *releaseBody) {
	if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &releaseRWBody{releaseBody: rb, w: w}
		return
	}
	resp.Body = rb
}

// bufferBody reads resp's body into memory, up to limit bytes, so that a
// body cut off or stalled fails the attempt rather than the caller's read.
// It reports whether the whole body is now in memory; a longer body (by its
// Content-Length, or found longer while read) is given back as it streams,
// the bytes read first from memory. On error the body has been closed.
// Memory grows with the bytes read, not with the Content-Length promised.
func bufferBody(resp *http.Response, limit int64) (whole bool, err error) {
	body := resp.Body
	if body == http.NoBody {
		return true, nil
	}
	if noContent(resp) {
		// Its Content-Length, if any, is what a GET would have got: there
		// is nothing to read, and nothing to check (RFC 9110, 6.4.1).
		body.Close()
		resp.Body = http.NoBody
		return true, nil
	}
	cl := resp.ContentLength
	if cl > limit {
		return false, nil
	}
	// One byte more than expected finds a longer body.
	expect := limit
	if cl >= 0 {
		expect = cl
	}
	buf, err := readUpTo(body, expect+min(1, math.MaxInt64-expect), cl)
	n := int64(len(buf))
	if err == io.ErrUnexpectedEOF && cl >= 0 && n <= cl {
		err = nil // a short body: told by its length, below
	}
	switch {
	case err != nil:
	case cl >= 0 && n > cl:
		err = fmt.Errorf("body longer than its Content-Length %d", cl)
	case cl >= 0 && n < cl:
		err = fmt.Errorf("body of %d bytes, Content-Length %d: %w", n, cl, io.ErrUnexpectedEOF)
	case n > limit:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), body), body}
		return false, nil
	}
	if err != nil {
		body.Close()
		return false, fmt.Errorf("retryhttp: reading response body: %w", err)
	}
	body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return true, nil
}

// noContent reports whether resp has no content by its request's method
// or its status: the answer to a HEAD, a 1xx, 204 or 304.
func noContent(resp *http.Response) bool {
	code := resp.StatusCode
	return resp.Request != nil && resp.Request.Method == http.MethodHead ||
		code >= 100 && code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
}

// readUpTo reads r until its end, or until it has read most bytes. It
// starts with room for hint+1 bytes (a body's Content-Length, or -1 when
// unknown: 512), at most readStart, and doubles the room as bytes fill it,
// never past most.
func readUpTo(r io.Reader, most, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		size = min(hint, readStart-1) + 1
	}
	buf := make([]byte, 0, min(size, most))
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), most-int64(len(buf))))) // doubles
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), most)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// readStart is the most room readUpTo makes before any byte is read.
const readStart = 64 << 10

// drainClose reads a failed attempt's response body, at most drainLimit
// bytes, and closes it, so that its connection can carry the next attempt.
// A body known to be empty or longer than drainLimit is closed at once (the
// latter's connection could not be reused anyway). A body that stalls is cut
// off limit after the drain starts (see cutter).
func (t *Transport) drainClose(resp *http.Response, limit time.Duration) {
	body := resp.Body
	if resp.ContentLength == 0 || resp.ContentLength > drainLimit || body == http.NoBody {
		body.Close()
		return
	}
	cut := t.cutOff(body, limit)
	cut.lr = io.LimitedReader{R: body, N: drainLimit}
	io.Copy(io.Discard, &cut.lr)
	cut.done(body)
}

// keepClose reads a failed attempt's response body into memory, at most
// drainLimit bytes and for at most limit, and closes it, so that its
// connection can carry the next attempt while the response is kept: the
// response's body is then the bytes read. It reports false, the body closed
// and lost, when the body is longer than drainLimit or did not end in time.
func (t *Transport) keepClose(resp *http.Response, limit time.Duration) bool {
	body := resp.Body
	if resp.ContentLength > drainLimit {
		body.Close()
		return false
	}
	if resp.ContentLength == 0 || body == http.NoBody {
		body.Close()
		resp.Body = http.NoBody
		return true
	}
	cut := t.cutOff(body, limit)
	var buf []byte
	var err error
	if n := resp.ContentLength; n > 0 {
		// Its size known: read it into a buffer of that size, not
		// io.ReadAll's larger one, then look for a longer body through the
		// cutter's byte.
		buf = make([]byte, 0, n)
		for len(buf) < cap(buf) && err == nil {
			var m int
			m, err = body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+m]
		}
		if err == nil {
			var one [1]byte
			err = probeEOF(body, one[:])
			if err == errLonger { // longer than it said: the rest
				var rest []byte
				rest, err = io.ReadAll(io.LimitReader(body, drainLimit-int64(len(buf))))
				buf = append(append(buf, one[0]), rest...)
			}
		}
		if err == io.EOF {
			err = nil
		}
	} else {
		buf, err = io.ReadAll(io.LimitReader(body, drainLimit+1))
		if cap(buf) > 2*len(buf)+64 { // kept while the retry waits: only what it holds
			buf = bytes.Clone(buf)
		}
	}
	cut.done(body)
	if err != nil || len(buf) > drainLimit {
		return false
	}
	resp.Body = &keptBody{buf}
	return true
}

// keptBody is a failed attempt's body kept in memory while its retry
// waits: the bytes not read yet (a slice alone, the least a waiting
// request can hold; bytes.Reader's is twice its size).
type keptBody struct{ b []byte }

func (k *keptBody) Read(p []byte) (int, error) {
	if len(k.b) == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, k.b)
	k.b = k.b[n:]
	return n, nil
}

// WriteTo writes what is left, for io.Copy.
func (k *keptBody) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(k.b)
	k.b = k.b[n:]
	return int64(n), err
}

func (*keptBody) Close() error { return nil }

// A cutter ends the reads of a failed attempt's body that stall: when its
// cut-off comes, it cancels the attempt's context if the body is the
// Transport's own (a releaseBody), else it closes the body, which ends a
// read in progress in net/http's transports (the connection is then lost,
// not the retry). Each drain has a cutter, and a timer, of its own.
type cutter struct {
	timer clock.Timer
	lr    io.LimitedReader // drainClose's, here so as not to allocate one

	mu     sync.Mutex
	abort  interface{ abort() } // what the cut-off ends: the attempt's context,
	body   io.Closer            // or else the body
	over   bool                 // the drain is over: the cut-off does nothing
	closed bool                 // the cut-off closed body
}

// cutOff returns a cutter set to end the reads of body limit from now. On
// the real clock, a body it cuts off is closed on a goroutine of its own:
// a Close that blocks (HTTP/2's may, on a stalled connection) must not
// hold up the timer's goroutine. (On a simulation's clock it is closed in
// turn, so that the simulation keeps its order of events.)
func (t *Transport) cutOff(body io.Closer, limit time.Duration) *cutter {
	c := new(cutter)
	if rb, ok := body.(interface{ abort() }); ok {
		c.abort = rb
	} else {
		c.body = body
	}
	async := t.realClock
	c.timer = t.clock.AfterFunc(limit, func() { c.cut(async) })
	return c
}

// cut is the cut-off: it ends what c was set to end, unless its drain is
// over.
func (c *cutter) cut(async bool) {
	c.mu.Lock()
	if c.over {
		c.mu.Unlock()
		return
	}
	abort, body := c.abort, c.body
	c.closed = abort == nil
	c.over = true
	c.mu.Unlock()
	switch {
	case abort != nil:
		abort.abort()
	case async:
		go body.Close()
	default:
		body.Close()
	}
}

// done ends the drain: its timer stopped, body closed unless the cut-off
// closed it (body is closed exactly once).
func (c *cutter) done(body io.Closer) {
	c.timer.Stop()
	c.mu.Lock()
	c.over = true
	closed := c.closed
	c.mu.Unlock()
	c.lr.R = nil
	if !closed {
		body.Close()
	}
}

// errLonger is probeEOF's: the body goes on past its announced length.
var errLonger = errors.New("retryhttp: body longer than its Content-Length")

// probeEOF reads body, read to its announced length, once more into one,
// a byte: io.EOF (or nil) where it ends, errLonger with the next byte in
// one where it goes on, or the read's error. A reader that returns nothing
// and no error is asked again, a few times.
func probeEOF(body io.Reader, one []byte) error {
	for range 8 {
		m, err := body.Read(one)
		switch {
		case m > 0:
			return errLonger
		case err != nil:
			return err
		}
	}
	return io.ErrNoProgress
}

// drainTime returns how long a failed attempt's body may take to drain
// before the next attempt, delay away: the delay itself, within
// [drainMinTime, drainMaxTime]. Waiting for a stalled body longer than the
// retry's own wait would delay the retry to save a connection.
func drainTime(delay time.Duration) time.Duration {
	return min(max(delay, drainMinTime), drainMaxTime)
}

const (
	drainLimit   = 64 << 10
	drainMinTime = 50 * time.Millisecond
	drainMaxTime = time.Second
)
