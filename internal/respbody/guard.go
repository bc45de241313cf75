package respbody

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// A Guard is a body read in RoundTrip's time (buffered, or peeked at by a
// Retryable): its reads end by a context's end, even where the body is
// deaf to every context (a base's own body may be), as the Guard closes
// it then, and its reads fail from then on with the context's error (as
// net/http's do). It closes the body once, however often it is closed.
type Guard struct {
	body  io.ReadCloser
	ctx   context.Context
	once  sync.Once
	err   error
	stop  func() bool
	ended atomic.Bool // closed at ctx's end
}

// NewGuard returns body, closed at ctx's end until Stop is called.
func NewGuard(ctx context.Context, body io.ReadCloser) *Guard {
	g := &Guard{body: body, ctx: ctx}
	if ctx.Done() != nil {
		g.stop = context.AfterFunc(ctx, func() {
			g.ended.Store(true)
			g.Close()
		})
	}
	return g
}

func (g *Guard) Read(p []byte) (int, error) {
	n, err := g.body.Read(p)
	if err != nil && err != io.EOF && g.ended.Load() {
		err = context.Cause(g.ctx)
	}
	return n, err
}

// Stop ends the guard: ctx's end no longer closes the body.
func (g *Guard) Stop() {
	if g.stop != nil {
		g.stop()
	}
}

// Close closes the body, the first time it is called.
func (g *Guard) Close() error {
	g.once.Do(func() { g.err = g.body.Close() })
	return g.err
}
