package retryhttp

import (
	"context"
	"net/http"
	"sync/atomic"
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
func VerdictHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := new(giveUpNote)
		r = r.WithContext(context.WithValue(r.Context(), giveUpNoteKey{}, n))
		h.ServeHTTP(&verdictWriter{ResponseWriter: w, note: n}, r)
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
// says so.
type verdictWriter struct {
	http.ResponseWriter
	note  *giveUpNote
	wrote bool // the final header is written
}

func (w *verdictWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.wrote = true
		h := w.Header()
		if code >= 500 && w.note.failing.Load() && h.Get("X-Should-Retry") == "" && h.Get("Stripe-Should-Retry") == "" {
			h.Set("X-Should-Retry", "false")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *verdictWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, as the wrapped writer's Flush does.
func (w *verdictWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *verdictWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
