package sim

// The simulation's server: an in-memory base transport that injects
// faults. Each attempt draws its fault, latency and answer from a PCG
// seeded by the seed, the request and the attempt's number, and reports
// through httptrace what net/http would (a connection asked for and got,
// the request's header written), so the Transport judges its errors as it
// would judge net/http's.

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
)

// A faultKind is what goes wrong with an attempt, if anything.
type faultKind uint8

const (
	faultNone        faultKind = iota // a 2xx answer
	faultStatus                       // a failure status (5xx, 429, 4xx), with or without a wait asked for
	faultRefused                      // the dial is refused: nothing was sent
	faultGoAway                       // an HTTP/2 graceful GOAWAY below the stream: not processed
	faultResetBefore                  // reset before the request's header was written
	faultResetMid                     // reset while the body was written: the header reached the server
	faultResetAfter                   // reset after the whole request was written: applied, answer lost
	faultEOF                          // the connection closed before the answer: applied
	faultHang                         // no answer until the attempt's context ends or the server gives up
	faultCert                         // a TLS certificate error: not transient
	faultContract                     // the base breaks the RoundTripper contract (both or neither)
	numFaults
)

var faultNames = [numFaults]string{"2xx", "status", "refused", "goaway", "reset before write",
	"reset mid body", "reset after write", "eof", "hang", "cert", "contract"}

// simServer answers attempts. It closes every request body it is given,
// exactly once, as a RoundTripper must: at once, or later on a goroutine
// of its own (as net/http's write loop may, after RoundTrip returned).
type simServer struct{ s *sim }

// A simCall is one attempt as the server got it.
type simCall struct {
	n, dup  int // AttemptNumber of its context, and how many calls had it before
	start   time.Time
	host    string
	header  http.Header // as received
	fault   faultKind
	reached bool // its header reached the server: it may have been applied

	// The request body the server read: whole (to EOF) or not, and the
	// error of the read; set when the read ends, under sim.mu.
	sent     []byte
	sentDone bool
	sentErr  error

	resp    *http.Response
	status  int
	content []byte // the response body's whole content
	body    *simRespBody
	hint    simHint
	noRetry bool // X-Should-Retry: false
	limited int  // answered as a rate-limited host answers (see limitAttempt), or limitedNone

	// A resumable host's (see resumableAnswer).
	ranged   bool   // it asked for a range: a resume
	wantFrom int    // ... from the bytes the caller's reads had returned as it came, and the cut's
	served   string // what the host answered it: whole, rest, ignored, changed, ...
	full     []byte // the whole body of the version it served (nil: no resumable body)
	version  int
}

func (sv *simServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sv.s
	r := reqOf(req.Context())
	if r == nil {
		s.failf(nil, "a request reached the server without the caller's context: %s", req.URL)
		closeBody(req)
		return nil, errors.New("sim: unknown request")
	}
	if r.warm { // a warm-up: a success at once
		closeBody(req)
		return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1,
			ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	c := &simCall{n: retryhttp.AttemptNumber(req.Context()), start: time.Now(), host: req.URL.Host,
		header: req.Header.Clone()}
	s.mu.Lock()
	c.dup = r.dups[c.n]
	r.dups[c.n]++
	if c.header.Get("Range") != "" { // a resume (see resumableAnswer)
		c.ranged, c.wantFrom = true, r.given+r.pending
		r.resumeCalls = append(r.resumeCalls, c)
	} else {
		r.calls = append(r.calls, c)
	}
	impatient := len(r.calls)+len(r.resumeCalls) > simPatience && !r.gaveUp
	if impatient {
		// A policy may retry without end (MaxAttempts huge, no deadline,
		// an attempt timeout shorter than the body's pauses): the caller
		// gives up, as one would, so that the seed ends.
		r.gaveUp = true
		r.cancelAt = max(time.Since(r.start), time.Nanosecond)
	}
	s.mu.Unlock()
	if impatient {
		s.count("caller gives up after " + fmt.Sprint(simPatience) + " attempts")
		r.cancel()
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|uint64(c.n)<<8|uint64(c.dup)))
	c.fault = s.drawFault(rng, c.n)
	if s.cfg.flaky {
		c.fault = faultNone
		if c.n == 1 {
			c.fault = faultStatus
		}
	}
	if race := s.raceRand(r, c, 4); s.cfg.racing && c.fault != faultNone && race.IntN(2) == 0 {
		c.fault = faultStatus // an answer, to race
	}
	if (s.cfg.slowFail || s.cfg.raceMore) && c.fault != faultNone && s.raceRand(r, c, 8).IntN(4) != 0 {
		c.fault = faultStatus // an answer: whose body is slow to read (see slowFailure), or to race (moreWaits)
	}
	s.limitAttempt(r, c)
	s.resumableFault(req, r, c)
	s.count("fault: " + faultNames[c.fault])
	if s.cfg.crowd && r.id == 1 && c.n == 1 && c.dup == 0 {
		s.sendCrowd() // while request 1 is in flight
	}
	resp, err := s.serve(rng, req, r, c)
	s.cancelAtAnswer(req, r, c, resp, err)
	s.mu.Lock()
	c.resp = resp
	s.mu.Unlock()
	if rng.IntN(8) == 0 {
		s.count("server keeps reading the request after answering")
		s.linger(req, resp, rng.Float64())
	}
	return resp, err
}

// raceRand returns a stream of draws for attempt c of a racing seed (see
// drawRace), what naming its use: a stream of its own, so that the seed's
// other draws stay as they were. In a racing seed, half the attempts fail
// at least, half the faults more are failure statuses, two thirds of the
// answers come 1 to 40 ms after their attempts went, half the failures
// ask for a valid wait, and a third of the failures' bodies stall deaf to
// every context; half the requests have a deadline of 5 to 84 ms.
func (s *sim) raceRand(r *simReq, c *simCall, what uint64) *rand.Rand {
	return rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|uint64(c.n)<<8|uint64(c.dup)|what<<56))
}

// simPatience is how many calls of a request the server takes before its
// caller gives up (cancels it).
const simPatience = 1000

// drawFault draws attempt n's fault: none beyond the 30th attempt of a
// request (the server recovers: no fault, no latency, a whole body), so
// that any policy ends, even one that cuts every attempt at 1 ms.
func (s *sim) drawFault(rng *rand.Rand, n int) faultKind {
	if n > 30 || rng.Float64() >= s.cfg.faultRate {
		return faultNone
	}
	weights := [numFaults]int{0, 30, 8, 3, 8, 6, 8, 5, 6, 2, 2}
	total := 0
	for _, w := range weights {
		total += w
	}
	x := rng.IntN(total)
	for k, w := range weights {
		if x < w {
			return faultKind(k)
		}
		x -= w
	}
	return faultStatus
}

// serve plays attempt c of request r.
func (s *sim) serve(rng *rand.Rand, req *http.Request, r *simReq, c *simCall) (*http.Response, error) {
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	latency := drawLatency(rng)
	if race := s.raceRand(r, c, 1); s.cfg.racing && race.IntN(3) != 0 {
		latency = time.Duration(1+race.IntN(40)) * time.Millisecond // after the hedge went
	}
	latency = s.raceLatency(r, c, latency)
	if c.n > 30 {
		latency = 0 // the server has recovered: at once, within any attempt timeout
	}
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(req.URL.Host)
	}
	connected := c.fault != faultRefused && c.fault != faultCert
	if connected && trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{})
	}
	switch c.fault {
	case faultRefused, faultGoAway, faultResetBefore, faultCert:
		if !sleepCtx(ctx, latency) {
			closeBody(req)
			return nil, canceled(ctx)
		}
		closeBody(req)
		return nil, c.unsentError()
	}
	c.reached = true
	if trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if c.fault == faultResetMid {
		s.readBody(req, c, 1+rng.IntN(100))
		return nil, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	}
	early := (c.fault == faultNone || c.fault == faultStatus) && rng.IntN(10) == 0
	if early {
		s.count("answer before the request body is read")
		s.lingering.Go(func() { s.readBody(req, c, -1) })
	} else {
		s.readBody(req, c, -1)
	}
	if !sleepCtx(ctx, latency) {
		return nil, canceled(ctx)
	}
	switch c.fault {
	case faultResetAfter:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case faultEOF:
		return nil, io.EOF
	case faultHang:
		if !sleepCtx(ctx, time.Duration(5+rng.IntN(120))*time.Second) {
			return nil, canceled(ctx)
		}
		return nil, io.ErrUnexpectedEOF // the server gave up
	case faultContract:
		if rng.IntN(2) == 0 {
			return nil, nil
		}
		return s.answer(rng, req, r, c), errors.New("sim: an error beside a response")
	}
	return s.answer(rng, req, r, c), nil
}

// unsentError is the error of an attempt whose request the server never got.
func (c *simCall) unsentError() error {
	switch c.fault {
	case faultRefused:
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case faultGoAway:
		return errors.New("http2: Transport received Server's graceful shutdown GOAWAY") // net/http's text
	case faultCert:
		return &net.OpError{Op: "remote error", Net: "tcp", Err: x509.UnknownAuthorityError{}}
	}
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

// drawLatency draws how long the server takes to answer.
func drawLatency(rng *rand.Rand) time.Duration {
	switch x := rng.IntN(20); {
	case x < 12:
		return 0
	case x < 17:
		return time.Duration(1+rng.IntN(20)) * time.Millisecond
	case x < 19:
		return time.Duration(50+rng.IntN(450)) * time.Millisecond
	}
	return time.Duration(1+rng.IntN(5)) * time.Second
}

// sleepCtx waits d, or until ctx ends: false.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// canceled is net/http's error for an attempt whose context ended.
func canceled(ctx context.Context) error {
	return fmt.Errorf("net/http: request canceled: %w", context.Cause(ctx))
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// readBody reads req's body, at most limit bytes (-1: all), and closes it,
// recording what was read. It returns once the read is over, or when the
// attempt's context ends: the read then goes on in the background, as
// net/http's write loop does.
func (s *sim) readBody(req *http.Request, c *simCall, limit int) {
	if req.Body == nil || req.Body == http.NoBody {
		s.mu.Lock()
		c.sentDone = limit < 0
		s.mu.Unlock()
		return
	}
	done := make(chan struct{})
	s.lingering.Go(func() {
		defer close(done)
		var b []byte
		var err error
		if limit < 0 {
			b, err = io.ReadAll(req.Body)
		} else {
			b, err = io.ReadAll(io.LimitReader(req.Body, int64(limit)))
		}
		req.Body.Close()
		s.mu.Lock()
		c.sent, c.sentErr, c.sentDone = b, err, limit < 0 && err == nil
		s.mu.Unlock()
	})
	select {
	case <-done:
	case <-req.Context().Done():
	}
}

// linger reads req after the answer went back, as net/http's write loop
// may: its header and URL, a while later (until the response's body is
// closed, at the latest).
func (s *sim) linger(req *http.Request, resp *http.Response, u float64) {
	var closed chan struct{}
	if resp != nil {
		if b, ok := resp.Body.(*simRespBody); ok {
			closed = b.closed
		}
	}
	s.lingering.Go(func() {
		t := time.NewTimer(time.Duration(u * float64(300*time.Millisecond)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-closed:
		}
		for name, values := range req.Header {
			_, _ = name, len(values)
		}
		_ = req.URL.String() + req.Host + req.Method
	})
}
