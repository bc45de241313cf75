package retryhttp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// AdviceHandler wraps the handler of a service that both serves HTTP and
// calls other services through retryhttp, so that retries happen at one
// layer of the stack only: the one right above the layer that fails.
//
// While h serves a request, the Transports its calls go through (with
// h's request context, or one derived from it) note when a call gave up
// on a dependency that is down or overloaded: after several attempts
// (ReasonExhausted, ReasonDeadline or ReasonNoRetries, counting those a
// layer above made at the request: its idempotency key's, or those its
// SDK's attempt header counts), or because the retry budget, the
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
func AdviceHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := new(giveUpNote)
		r = r.WithContext(context.WithValue(r.Context(), giveUpNoteKey{}, n))
		h.ServeHTTP((&verdictWriter{note: n}).wrap(w), r)
	})
}

type giveUpNoteKey struct{}

// giveUpNote records, for one request an AdviceHandler serves, that a call
// made while serving it gave up on a failing dependency.
type giveUpNote struct{ failing atomic.Bool }

// noteGiveUp tells the AdviceHandler serving ctx's request, if any, that a
// call gave up for reason after attempts, a layer above's included.
func noteGiveUp(ctx context.Context, reason Reason, attempts int) {
	n, ok := ctx.Value(giveUpNoteKey{}).(*giveUpNote)
	if !ok {
		return
	}
	switch reason {
	case ReasonBudget, ReasonRetryAfter, ReasonServer, ReasonThrottled:
		n.failing.Store(true)
	case ReasonExhausted, ReasonDeadline, ReasonNoRetries:
		if attempts > 1 {
			n.failing.Store(true)
		}
	}
}

// verdictWriter adds X-Should-Retry: false to a 5xx response when its note
// says so, before the header is written. It wraps a ResponseWriter with the
// optional interfaces that writer has, as far as net/http's own writers go:
// HTTP/1.1's (Flusher, Hijacker, io.ReaderFrom, io.StringWriter,
// CloseNotifier) and HTTP/2's (Flusher, Pusher, io.StringWriter,
// CloseNotifier); any other writer keeps Flusher, if it has it, and all of
// its methods through http.ResponseController (Unwrap). A wrapper that hid
// Hijacker would break every WebSocket upgrade, and one that claimed what
// the writer lacks would lie. (Written here rather than taken from
// httpsnoop, which generates every combination: the core module depends on
// nothing beyond the standard library and three small modules.)
type verdictWriter struct {
	w     http.ResponseWriter
	note  *giveUpNote
	wrote bool // the final header is written
}

// The methods of the wrappers, by what they do.
func (v *verdictWriter) writeHeader(code int) {
	v.header(v.w.Header(), code)
	v.w.WriteHeader(code)
}

func (v *verdictWriter) write(b []byte) (int, error) {
	v.header(v.w.Header(), http.StatusOK)
	return v.w.Write(b)
}

func (v *verdictWriter) flush() {
	v.header(v.w.Header(), http.StatusOK)
	v.w.(http.Flusher).Flush()
}

func (v *verdictWriter) writeString(s string) (int, error) {
	v.header(v.w.Header(), http.StatusOK)
	return io.WriteString(v.w, s)
}

func (v *verdictWriter) readFrom(src io.Reader) (int64, error) {
	v.header(v.w.Header(), http.StatusOK)
	return v.w.(io.ReaderFrom).ReadFrom(src)
}

// basicWriter is a verdictWriter with the methods every ResponseWriter
// has, and Unwrap for http.ResponseController.
type basicWriter struct{ v *verdictWriter }

func (w basicWriter) Header() http.Header         { return w.v.w.Header() }
func (w basicWriter) Write(b []byte) (int, error) { return w.v.write(b) }
func (w basicWriter) WriteHeader(code int)        { w.v.writeHeader(code) }
func (w basicWriter) Unwrap() http.ResponseWriter { return w.v.w }

// flushWriter is one over a writer with Flush.
type flushWriter struct{ basicWriter }

func (w flushWriter) Flush() { w.v.flush() }

// h1Writer is one over net/http's HTTP/1.1 writer.
type h1Writer struct{ flushWriter }

func (w h1Writer) WriteString(s string) (int, error)   { return w.v.writeString(s) }
func (w h1Writer) ReadFrom(r io.Reader) (int64, error) { return w.v.readFrom(r) }
func (w h1Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.v.w.(http.Hijacker).Hijack()
}
func (w h1Writer) CloseNotify() <-chan bool { return closeNotify(w.v.w) }

// h2Writer is one over net/http's HTTP/2 writer.
type h2Writer struct{ flushWriter }

func (w h2Writer) WriteString(s string) (int, error) { return w.v.writeString(s) }
func (w h2Writer) Push(target string, opts *http.PushOptions) error {
	return w.v.w.(http.Pusher).Push(target, opts)
}
func (w h2Writer) CloseNotify() <-chan bool { return closeNotify(w.v.w) }

func closeNotify(w http.ResponseWriter) <-chan bool {
	return w.(interface{ CloseNotify() <-chan bool }).CloseNotify()
}

// The optional interfaces of net/http's two writers.
type (
	h1Methods interface {
		http.Flusher
		http.Hijacker
		io.ReaderFrom
		io.StringWriter
		CloseNotify() <-chan bool
	}
	h2Methods interface {
		http.Flusher
		http.Pusher
		io.StringWriter
		CloseNotify() <-chan bool
	}
)

// wrap returns w with the verdict, as the wrapper that has w's optional
// interfaces, as far as they go (see verdictWriter).
func (v *verdictWriter) wrap(w http.ResponseWriter) http.ResponseWriter {
	v.w = w
	base := basicWriter{v}
	_, hijacks := w.(http.Hijacker)
	_, pushes := w.(http.Pusher)
	_, reads := w.(io.ReaderFrom)
	_, h1 := w.(h1Methods)
	_, h2 := w.(h2Methods)
	_, flushes := w.(http.Flusher)
	switch {
	case h1 && !pushes:
		return h1Writer{flushWriter{base}}
	case h2 && !hijacks && !reads:
		return h2Writer{flushWriter{base}}
	case flushes:
		return flushWriter{base}
	}
	return base
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
