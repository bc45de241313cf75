// Package mark puts the mark of an attempt in the context of the
// attempt's request. A Transport that finds a live mark in its request's
// context is inside another Transport's attempt, and sends once: retries
// never multiply across layers. Attempts and AttemptNumber read a mark's
// number.
package mark

import (
	"context"
	"net/http"
	"sync/atomic"
)

type key struct{}

// A Mark is an attempt's, on its request's context. It is live while the
// attempt's base RoundTrip runs: a request built later from a response's
// context (the next page of a listing) is a request of its own.
type Mark struct {
	N    int         // the attempt's number: 1 for the first; set before the mark is used
	done atomic.Bool // the attempt's RoundTrip has returned

	// Stop is why the request stopped retrying, when the attempt's
	// response is the failure it ended with (0 otherwise); set before
	// the request's RoundTrip returns, read after.
	Stop uint8

	// Timeline is the request's timeline when its policy records one (a
	// *retryhttp.timeline); set before the request's RoundTrip returns.
	Timeline any
}

// Done records that the attempt's RoundTrip has returned.
func (m *Mark) Done() { m.done.Store(true) }

// Context is a context that carries a mark, made in one allocation where
// context.WithValue would take two: set Context and Mark.N before use.
type Context struct {
	context.Context
	Mark Mark
}

// Value returns the mark for the mark's key, else parent's value.
func (c *Context) Value(k any) any {
	if _, ok := k.(key); ok {
		return &c.Mark
	}
	return c.Context.Value(k)
}

// New returns parent carrying a new mark for attempt n.
func New(parent context.Context, n int) *Context {
	return &Context{Context: parent, Mark: Mark{N: n}}
}

// Ended returns parent carrying a mark of attempt n that is not live, its
// request having stopped retrying for stop.
func Ended(parent context.Context, n int, stop uint8) context.Context {
	m := &Mark{N: n, Stop: stop}
	m.Done()
	return With(parent, m)
}

// With returns parent carrying m.
func With(parent context.Context, m *Mark) context.Context {
	return context.WithValue(parent, key{}, m)
}

// Of returns the mark in ctx, or nil.
func Of(ctx context.Context) *Mark {
	m, _ := ctx.Value(key{}).(*Mark)
	return m
}

// OfRequest returns the mark in req's context, or nil (also for a nil req).
func OfRequest(req *http.Request) *Mark {
	if req == nil {
		return nil
	}
	return Of(req.Context())
}

// Live returns the mark in ctx and whether it is live: ctx belongs to an
// attempt still being sent.
func Live(ctx context.Context) (m *Mark, live bool) {
	m = Of(ctx)
	return m, m != nil && !m.done.Load()
}
