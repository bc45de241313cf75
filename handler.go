package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/felixge/httpsnoop"
)

// VerdictHandler wraps the handler of a service that both serves HTTP and
// calls other services through retryhttp, so that retries happen at one
// layer of the stack only: the one right above the layer that fails.
//
// While h serves a request, the Transports its calls go through (with
// h's request context, or one derived from it) note when a call gave up
// on a dependency that is down or overloaded: after several attempts
// (ReasonExhausted, ReasonDeadline, or ReasonOuter: a layer above had
// retried it already), or because the retry budget, the
// server's wait or its own X-Should-Retry: false stopped the retries, or
// adaptive throttling did (ReasonBudget, ReasonRetryAfter, ReasonServer,
// ReasonThrottled). If h then answers with a
// 5xx status, its response carries "X-Should-Retry: false": the callers of
// this service, through retryhttp or any client that honours the field,
// do not retry what was already retried one layer down. A response that
// sets X-Should-Retry (or Stripe-Should-Retry) itself keeps its own.
//
// Without it, a chain of three services each retrying 4 times sends 16
// attempts to the last one when it is down; with it, 4.
//
// The ResponseWriter h gets has the optional interfaces of the server's
// (http.Hijacker for a WebSocket upgrade, http.Flusher, io.ReaderFrom,
// http.Pusher and the others), each implemented or not as the server's
// is, and an Unwrap method for http.ResponseController.
func VerdictHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := new(giveUpNote)
		r = r.WithContext(context.WithValue(r.Context(), giveUpNoteKey{}, n))
		h.ServeHTTP((&verdictWriter{note: n}).wrap(w), r)
	})
}

type giveUpNoteKey struct{}

// giveUpNote records, for one request a VerdictHandler serves, that a call
// made while serving it gave up on a failing dependency.
type giveUpNote struct{ failing atomic.Bool }

// noteGiveUp tells the VerdictHandler serving ctx's request, if any, that a
// call gave up after attempts for reason.
func noteGiveUp(ctx context.Context, reason Reason, attempts int) {
	n, ok := ctx.Value(giveUpNoteKey{}).(*giveUpNote)
	if !ok {
		return
	}
	switch reason {
	case ReasonBudget, ReasonRetryAfter, ReasonServer, ReasonThrottled:
		n.failing.Store(true)
	case ReasonExhausted, ReasonDeadline, ReasonOuter:
		if attempts > 1 {
			n.failing.Store(true)
		}
	}
}

// verdictWriter adds X-Should-Retry: false to a 5xx response when its note
// says so, as hooks on the methods of a ResponseWriter that write the
// header. Its wrapper comes from httpsnoop, whose generated wrappers have
// exactly the optional interfaces of the writer they wrap: a wrapper type
// of one's own would hide those it lacks (as one without Hijack breaks
// every WebSocket upgrade), and one with them all would claim some the
// writer lacks.
type verdictWriter struct {
	note  *giveUpNote
	wrote bool // the final header is written
}

// wrap returns w with the verdict's hooks. (Hijack needs none, and
// WriteString and FlushError go through the hooks of Write and Flush.)
func (v *verdictWriter) wrap(w http.ResponseWriter) http.ResponseWriter {
	return httpsnoop.Wrap(w, httpsnoop.Hooks{
		WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
			return func(code int) {
				v.header(w.Header(), code)
				next(code)
			}
		},
		Write: func(next httpsnoop.WriteFunc) httpsnoop.WriteFunc {
			return func(b []byte) (int, error) {
				v.header(w.Header(), http.StatusOK)
				return next(b)
			}
		},
		Flush: func(next httpsnoop.FlushFunc) httpsnoop.FlushFunc {
			return func() {
				v.header(w.Header(), http.StatusOK)
				next()
			}
		},
		ReadFrom: func(next httpsnoop.ReadFromFunc) httpsnoop.ReadFromFunc {
			return func(src io.Reader) (int64, error) {
				v.header(w.Header(), http.StatusOK)
				return next(src)
			}
		},
	})
}

// header is called before the header h is written with status code, or
// implicitly with 200 by a write: it adds the verdict to the final one.
func (v *verdictWriter) header(h http.Header, code int) {
	if v.wrote || code < 200 {
		return
	}
	v.wrote = true
	if code >= 500 && v.note.failing.Load() && h.Get("X-Should-Retry") == "" && h.Get("Stripe-Should-Retry") == "" {
		h.Set("X-Should-Retry", "false")
	}
}
