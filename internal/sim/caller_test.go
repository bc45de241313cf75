package sim

// The simulation's caller: it sends a request, reads the answer, and
// remembers its keys as the Transport does; its request bodies record
// their closes and may stall; a snapshot tells whether RoundTrip changed
// its request.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/recent"
)

// do sends request r as a caller would, reads the response body and
// closes it.
func (s *sim) do(r *simReq) {
	ctx := s.context(r)
	r.req = s.buildRequest(r, ctx)
	r.snap = snapshot(r.req)
	r.start = time.Now()
	s.priorUse(r)
	s.sendingFor(r)
	defer s.sendingFor(nil)
	func() {
		defer func() {
			if v := recover(); v != nil {
				r.panicked = v
				if _, ok := v.(simPanic); !ok {
					s.failf(r, "RoundTrip panicked: %v\n%s", v, debug.Stack())
				}
			}
		}()
		if !s.cfg.verdict {
			r.resp, r.err = s.tr.RoundTrip(r.req)
			return
		}
		// Inside a handler, as a service calls its dependency: the handler
		// then answers 502, and AdviceHandler adds its verdict or not.
		h := retryhttp.AdviceHandler(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
			r.req = r.req.WithContext(hr.Context()) // the caller's request, now
			r.snap = snapshot(r.req)
			r.resp, r.err = s.tr.RoundTrip(r.req)
			w.WriteHeader(http.StatusBadGateway)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(r.req.Context(), http.MethodGet, "/", nil))
		r.verdict = rec.Header().Get("X-Should-Retry")
	}()
	r.end = time.Now()
	r.pastHorizon = r.end.After(s.horizon)
	if r.panicked == nil {
		r.timeline = retryhttp.Timeline(r.resp, r.err) // as the caller reads it, before the body
	}
	if r.resp != nil && r.resp.Body != nil {
		if s.cfg.resumable {
			g := goroutine()
			s.drawMu.Lock()
			r.readG = g // what the Transport does on it from now on resumes the body
			s.drawMu.Unlock()
		}
		s.read(r)
	}
	s.mu.Lock() // a hedge that lost may still be on its way
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf("request %d %s %s body %s key %q sdk %d deadline %v/%v cancel %v "+
		"custom %v stale %v overrides %d: %s", r.id, r.method, r.url, r.bodyKind, r.callerKey, r.sdkAttempt,
		r.hasDeadline, r.deadline, r.cancelAt, r.custom, r.stale, len(r.overrides), r.outcome()))
}

// read reads the response body of r as a caller would, all of it or (one
// time in ten) its first bytes, and closes it, at the latest after
// simReadFor.
func (s *sim) read(r *simReq) {
	var body io.ReadCloser = r.resp.Body
	if s.cfg.resumable {
		body = &simCounted{ReadCloser: body, s: s, r: r}
	}
	var cut atomic.Bool
	closer := time.AfterFunc(simReadFor, func() { cut.Store(true); body.Close() })
	if r.partial > 0 {
		r.got, r.readErr = io.ReadAll(io.LimitReader(body, int64(r.partial)))
	} else {
		r.got, r.readErr = io.ReadAll(body)
	}
	if closer.Stop() {
		body.Close()
	}
	r.readEnd, r.readCut = time.Now(), cut.Load()
}

// simCounted counts the bytes the caller's reads of r's body returned.
type simCounted struct {
	io.ReadCloser
	s *sim
	r *simReq
}

func (c *simCounted) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.s.mu.Lock()
	c.r.given += n
	c.r.pending = 0 // (given with the error of a cut, now the caller's)
	c.s.mu.Unlock()
	return n, err
}

// simReadFor is how long a caller reads a response body before it gives
// up and closes it.
const simReadFor = 30 * time.Second

func (r *simReq) outcome() string {
	s := fmt.Sprintf("%d attempts, %d calls, %v", len(r.attempts), len(r.calls), r.end.Sub(r.start))
	if len(r.resumeAttempts) > 0 {
		s += fmt.Sprintf(", %d resumes (%d calls)", len(r.resumeAttempts), len(r.resumeCalls))
	}
	if r.panicked != nil {
		return s + fmt.Sprintf(", panic %v", r.panicked)
	}
	if r.resp != nil {
		return s + fmt.Sprintf(", status %d, read %d bytes, %v", r.resp.StatusCode, len(r.got), r.readErr)
	}
	return s + fmt.Sprintf(", error %v", r.err)
}

// keyLooked reports whether the Transport looks for the caller's key of r
// (and so remembers it, for the retries of a layer above): whatever the
// method, in its attempt loop.
func (r *simReq) keyLooked() bool { return r.callerKey != "" }

// mayBeFast reports whether r may have taken the Transport's fast path,
// which remembers no key: an idempotent request without a body, answered
// at its first attempt.
func (r *simReq) mayBeFast() bool {
	return idempotentMethod(r.method) && (r.bodyKind == "none" || r.bodyKind == "NoBody") &&
		len(r.attempts) == 1 && r.err == nil
}

// priorUse sets r.prior: the attempts its caller's key had lately.
func (s *sim) priorUse(r *simReq) {
	r.prior = -1
	if !r.keyLooked() || s.cfg.concurrent {
		return
	}
	u, ok := s.keys[r.callerKey]
	switch {
	case !ok || r.start.Sub(u.last) > recent.TTL:
		r.prior = 0
	case u.attempts >= 0:
		r.prior = u.attempts
	}
}

// recordKey remembers the attempts of r's key, as the Transport does,
// once r's world has settled.
func (s *sim) recordKey(r *simReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.keyLooked() || s.cfg.concurrent || len(r.attempts) == 0 {
		return
	}
	u := s.keys[r.callerKey]
	if r.panicked != nil || r.prior < 0 || u.attempts < 0 || r.mayBeFast() {
		s.keys[r.callerKey] = simKeyUse{attempts: -1, last: r.end} // unknown from now on
		return
	}
	s.keys[r.callerKey] = simKeyUse{attempts: r.prior + len(r.attempts), last: r.end}
}

// ---- the caller's request bodies ----

// simBody is a caller's request body: it records its closes, fails reads
// after the first close, and may stall once.
type simBody struct {
	data    []byte
	pauseAt int
	pause   time.Duration

	mu     sync.Mutex
	off    int
	paused bool
	closes atomic.Int32
	once   sync.Once
	closed chan struct{}
}

var errSimBodyClosed = errors.New("sim: read on a closed request body")

func (s *sim) newBody(r *simReq, first bool) *simBody {
	b := &simBody{data: r.payload, closed: make(chan struct{})}
	if first {
		b.pauseAt, b.pause = r.pauseAt, r.pause
	}
	s.mu.Lock()
	r.bodies = append(r.bodies, b)
	s.mu.Unlock()
	return b
}

func (b *simBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pause > 0 && !b.paused && b.off >= b.pauseAt {
		b.paused = true
		b.mu.Unlock()
		t := time.NewTimer(b.pause)
		select {
		case <-t.C:
		case <-b.closed:
		}
		t.Stop()
		b.mu.Lock()
	}
	select {
	case <-b.closed:
		return 0, errSimBodyClosed
	default:
	}
	end := len(b.data)
	if b.pause > 0 && !b.paused {
		end = b.pauseAt
	}
	return readTo(p, b.data, &b.off, end)
}

func (b *simBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() { close(b.closed) })
	return nil
}

// ---- the caller's request, unchanged ----

// simSnapshot is what a caller's request was before RoundTrip.
type simSnapshot struct {
	method, host, proto string
	url                 *url.URL
	urlValue            url.URL
	header              http.Header
	headerMap           uintptr
	contentLength       int64
	body                io.ReadCloser
	getBody             uintptr
	ctx                 context.Context
	close               bool
}

func snapshot(req *http.Request) simSnapshot {
	return simSnapshot{method: req.Method, host: req.Host, proto: req.Proto, url: req.URL, urlValue: *req.URL,
		header: req.Header.Clone(), headerMap: reflect.ValueOf(req.Header).Pointer(),
		contentLength: req.ContentLength, body: req.Body, getBody: reflect.ValueOf(req.GetBody).Pointer(),
		ctx: req.Context(), close: req.Close}
}

// drawFor returns a PCG for a draw of request r's attempt n that does not
// depend on the order in which concurrent attempts draw.
func (s *sim) drawFor(r *simReq, n int, what uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|uint64(n)<<8|what<<60))
}
