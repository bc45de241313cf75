package testutil

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// A CloseRecorder is a body that records its Close calls.
type CloseRecorder struct {
	io.Reader
	closes atomic.Int32
	once   sync.Once
	done   chan struct{} // closed on the first Close
}

// NewCloseRecorder returns a body reading r that records its closes.
func NewCloseRecorder(r io.Reader) *CloseRecorder {
	return &CloseRecorder{Reader: r, done: make(chan struct{})}
}

// NewStalledBody returns a body that sends nothing until it is closed: its
// reads block until then, and then fail with io.ErrClosedPipe.
func NewStalledBody() *CloseRecorder {
	c := NewCloseRecorder(nil)
	c.Reader = stalled{c.done}
	return c
}

// stalled is the reader of a stalled body: it waits for done.
type stalled struct{ done <-chan struct{} }

func (s stalled) Read([]byte) (int, error) {
	<-s.done
	return 0, io.ErrClosedPipe
}

// Close records the call.
func (c *CloseRecorder) Close() error {
	c.closes.Add(1)
	c.once.Do(func() { close(c.done) })
	return nil
}

// Closes returns how many times the body was closed.
func (c *CloseRecorder) Closes() int { return int(c.closes.Load()) }

// WaitClosed reports whether the body is closed within a generous bound. A
// RoundTripper may close a request body on another goroutine after
// RoundTrip returns (net/http's does, once it has written it).
func (c *CloseRecorder) WaitClosed() bool {
	select {
	case <-c.done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
