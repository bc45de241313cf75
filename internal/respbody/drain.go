package respbody

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// Drain reads a failed attempt's response body, at most Limit
// bytes, and closes it, so that its connection can carry the next attempt.
// A body known to be empty or longer than Limit is closed at once (the
// latter's connection could not be reused anyway). A body that stalls is cut
// off limit after the drain starts, or when ctx (the caller's) ends (see
// cutter).
func Drain(ctx context.Context, resp *http.Response, limit time.Duration, clk clock.Clock) {
	body := resp.Body
	if resp.ContentLength == 0 || resp.ContentLength > Limit || body == http.NoBody {
		body.Close()
		return
	}
	cut := cutOff(ctx, body, limit, clk)
	cut.lr = io.LimitedReader{R: body, N: Limit}
	io.Copy(io.Discard, &cut.lr)
	cut.done(body)
}

// Keep reads a failed attempt's response body into memory, at most
// Limit bytes and for at most limit (or until ctx, the caller's, ends), and
// closes it, so that its connection can carry the next attempt while the
// response is kept: the response's body is then the bytes read. It reports
// false, the body closed and lost, when the body is longer than Limit or
// did not end in time.
func Keep(ctx context.Context, resp *http.Response, limit time.Duration, clk clock.Clock) bool {
	body := resp.Body
	if resp.ContentLength > Limit {
		body.Close()
		return false
	}
	if resp.ContentLength == 0 || body == http.NoBody {
		body.Close()
		resp.Body = http.NoBody
		return true
	}
	cut := cutOff(ctx, body, limit, clk)
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
				rest, err = io.ReadAll(io.LimitReader(body, Limit-int64(len(buf))))
				buf = append(append(buf, one[0]), rest...)
			}
		}
		if err == io.EOF {
			err = nil
		}
	} else {
		buf, err = io.ReadAll(io.LimitReader(body, Limit+1))
		if cap(buf) > 2*len(buf)+64 { // kept while the retry waits: only what it holds
			buf = bytes.Clone(buf)
		}
	}
	cut.done(body)
	if err != nil || len(buf) > Limit {
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
// cut-off comes, or the caller's context ends first, it cancels the
// attempt's context if the body is the Transport's own (a Release), and it
// closes the body, which ends a read in progress in net/http's transports
// (the connection is then lost, not the retry), and in any base whose body
// ignores contexts. Each drain has a cutter, and a timer, of its own.
type cutter struct {
	timer   clock.Timer
	unwatch chan struct{}    // closed to end the watch of the caller's context; nil if none
	lr      io.LimitedReader // Drain's, here so as not to allocate one

	mu     sync.Mutex
	abort  interface{ abort() } // the attempt's context, if the body is a Release
	body   io.Closer            // what the cut-off closes
	over   bool                 // the drain is over: the cut-off does nothing
	closed bool                 // the cut-off closed body
}

// cutOff returns a cutter set to end the reads of body limit from now, or
// when ctx ends. On the real clock, a body it cuts off at its time is closed
// on a goroutine of its own: a Close that blocks (HTTP/2's may, on a
// stalled connection) must not hold up the timer's goroutine. (On a
// simulation's clock it is closed in turn, so that the simulation keeps its
// order of events; there ctx's end cuts nothing, since a context on the
// virtual clock ends only at its deadline, which limit already respects.)
func cutOff(ctx context.Context, body io.Closer, limit time.Duration, clk clock.Clock) *cutter {
	c := &cutter{body: body}
	if rb, ok := body.(interface{ abort() }); ok {
		c.abort = rb
	}
	_, async := clk.(clock.Real)
	c.timer = clk.AfterFunc(limit, func() { c.cut(async) })
	if _, virtual := clk.(*clock.Virtual); !virtual && ctx.Done() != nil {
		c.unwatch = make(chan struct{})
		go c.watch(ctx.Done())
	}
	return c
}

// watch cuts the reads off when done (the caller's context's) is closed
// before the drain is over. It is a goroutine that ends with the drain,
// not context.AfterFunc, which would leave a map of children on the
// caller's context for as long as it lives: on a request waiting in line
// with its body kept, some 250 B.
func (c *cutter) watch(done <-chan struct{}) {
	select {
	case <-done:
		c.cut(false)
	case <-c.unwatch:
	}
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
	c.closed = true
	c.over = true
	c.mu.Unlock()
	if abort != nil {
		abort.abort()
	}
	if async {
		go body.Close()
	} else {
		body.Close()
	}
}

// done ends the drain: its timer stopped, body closed unless the cut-off
// closed it (body is closed exactly once).
func (c *cutter) done(body io.Closer) {
	c.timer.Stop()
	if c.unwatch != nil {
		close(c.unwatch)
	}
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

// Time returns how long a failed attempt's body may take to drain
// before the next attempt, delay away: the delay itself, within
// [MinTime, MaxTime]. Waiting for a stalled body longer than the
// retry's own wait would delay the retry to save a connection.
func Time(delay time.Duration) time.Duration {
	return min(max(delay, MinTime), MaxTime)
}

// Bounds of a drain: the longest body drained (or kept), and how long a
// drain may take.
const (
	Limit   = 64 << 10
	MinTime = 50 * time.Millisecond
	MaxTime = time.Second
)
