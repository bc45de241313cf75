package sim

// The draw and the invariants of resumed bodies (Policy.ResumeResponse): a
// share of the seeds' hosts answer GETs with bodies that allow a resume or
// not (a strong or weak ETag, a Last-Modified, a content coding, no
// Accept-Ranges), cut them after a drawn number of bytes, and answer the
// Range of a resume as a server should, or not (a 200 whole, another
// version, a wrong Content-Range); checkResume checks that the caller
// reads a prefix of the body first served, and the resumes the Transport
// sent. From streams of their own (the seed's stream 11, and streams per
// request and attempt), so that every other draw of a seed stays as it was.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
)

// drawResume makes the hosts of a third of the seeds (those that nest no
// Transport, whose hooks do not panic, and that draw no crowd, HostWait or
// tiny budget) serve resumable bodies: in a quarter of them ResumeResponse
// stays off; in the others it is on, for every request in two of three,
// else through WithPolicy for half the requests (see resumeRequest).
func (s *sim) drawResume() {
	c, rng := &s.cfg, rand.New(rand.NewPCG(s.seed, 11))
	if rng.IntN(3) != 0 || c.nest != nestNone || c.panicHook != "" || c.crowd || c.hostWait || c.warm > 0 || c.flaky {
		return
	}
	c.resumable = true
	switch {
	case rng.IntN(4) == 0:
		c.desc = append(c.desc, "resumable bodies, ResumeResponse off")
		s.count("config: resumable bodies, ResumeResponse off")
	case rng.IntN(3) != 0:
		c.policy.ResumeResponse = true
		c.desc = append(c.desc, "resumable bodies, ResumeResponse on")
		s.count("config: resumable bodies, ResumeResponse on")
	default:
		c.resumeEach = true
		c.desc = append(c.desc, "resumable bodies, ResumeResponse on for half the requests, through WithPolicy")
		s.count("config: resumable bodies, ResumeResponse on for some requests")
	}
}

// The bodies a resumable host serves (see simResource).
const (
	resStrong      = iota // a strong ETag: resumable
	resModified           // no ETag, a Last-Modified a day before the Date: resumable
	resWeak               // a weak ETag
	resNone               // no validator
	resModifiedNow        // a Last-Modified at the Date: not a strong validator
	resCoded              // a strong ETag, Content-Encoding: gzip
	resNoRanges           // a strong ETag, no Accept-Ranges
	numRes
)

var resNames = [numRes]string{"strong ETag", "Last-Modified", "weak ETag", "no validator",
	"Last-Modified at the Date", "content coding", "no Accept-Ranges"}

// simResource is the body a request's host serves to a GET, in versions.
type simResource struct {
	size    int
	kind    int
	unknown bool // the first answer's length is not told
	version int  // the host's version, from 1 (under sim.mu)
}

// resumeRequest draws, for request r of a seed with resumable hosts, the
// body its host serves, makes half the requests GETs, a quarter of them
// read part of the body, and, if the seed turns ResumeResponse on for
// some requests alone, half of them a WithPolicy that does.
func (s *sim) resumeRequest(r *simReq) {
	if !s.cfg.resumable {
		return
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|11))
	if rng.IntN(2) == 0 {
		r.method = http.MethodGet
	}
	r.res = &simResource{size: pick(rng, 1+rng.IntN(100), 1+rng.IntN(5000), 70000), version: 1,
		kind: pick(rng, resStrong, resStrong, resStrong, resStrong, resModified, resModified, resWeak, resNone,
			resModifiedNow, resCoded, resNoRanges), unknown: rng.IntN(4) == 0}
	if rng.IntN(4) == 0 {
		r.partial = 1 + rng.IntN(r.res.size+50)
	}
	if !s.cfg.resumeEach || rng.IntN(2) != 0 {
		return
	}
	on := simOverride{p: retryhttp.Policy{ResumeResponse: true}}
	if rng.IntN(2) == 0 {
		r.overrides = append(r.overrides, on)
	} else {
		r.overrides = append([]simOverride{on}, r.overrides...)
	}
	s.count("request that resumes its body of its own")
}

// content returns version v of the body of request id.
func (res *simResource) content(seed uint64, id, v int) []byte {
	b := fmt.Appendf(nil, "seed %d request %d version %d:", seed, id, v)
	for i := range res.size {
		b = append(b, 'a'+byte((i+v)%26))
	}
	return b
}

// simModified is the Last-Modified of version v of a body.
func simModified(v int) time.Time { return time.Date(1999, 12, 31, 0, 0, v, 0, time.UTC) }

// validator returns the If-Range that names version v, if any.
func (res *simResource) validator(v int) string {
	switch res.kind {
	case resStrong, resCoded, resNoRanges:
		return fmt.Sprintf(`"v%d"`, v)
	case resModified:
		return simModified(v).Format(http.TimeFormat)
	}
	return ""
}

// allows reports whether the first answer allows a resume (see
// retryhttp.Policy.ResumeResponse).
func (res *simResource) allows() bool { return res.kind == resStrong || res.kind == resModified }

// header writes the header of version v into h.
func (res *simResource) header(h http.Header, v int) {
	now := time.Now().UTC().Truncate(time.Second)
	if res.kind != resNoRanges {
		h.Set("Accept-Ranges", "bytes")
	}
	switch res.kind {
	case resStrong, resCoded, resNoRanges:
		h.Set("ETag", res.validator(v))
	case resWeak:
		h.Set("ETag", fmt.Sprintf(`W/"v%d"`, v))
	case resModified:
		h.Set("Last-Modified", res.validator(v))
		h.Set("Date", now.Format(http.TimeFormat))
	case resModifiedNow:
		h.Set("Last-Modified", now.Format(http.TimeFormat))
		h.Set("Date", now.Format(http.TimeFormat))
	}
	if res.kind == resCoded {
		h.Set("Content-Encoding", "gzip")
	}
}

// resumableAnswer makes the 2xx answer c to a GET of request r, whose host
// serves a resumable body, that body: whole (a 200) to a request without
// a Range; to a resume, the rest (a 206), or, drawn, a 200 whole (the
// Range ignored, or a new version the If-Range no longer names), a 206 of
// another version, or a wrong Content-Range. Two thirds of the first answers and
// a third of the rests are cut after a drawn number of bytes (a reset, or
// io.ErrUnexpectedEOF, at times with the last bytes before it); the host
// recovers after 30 attempts.
func (s *sim) resumableAnswer(req *http.Request, r *simReq, c *simCall, resp *http.Response) {
	if r.res == nil || req.Method != http.MethodGet || c.status/100 != 2 {
		return
	}
	rng := s.raceRand(r, c, 15)
	s.mu.Lock()
	if c.ranged && c.n <= 30 && rng.IntN(10) == 0 {
		r.res.version++ // the body changed on the host
	}
	v := r.res.version
	s.mu.Unlock()
	c.version, c.full = v, r.res.content(s.seed, r.id, v)
	r.res.header(resp.Header, v)
	data, cut := c.full, rng.IntN(3) != 0
	c.status, c.served = http.StatusOK, "whole"
	if c.ranged {
		data, cut = s.serveRange(rng, req, r, c, resp.Header)
	}
	resp.StatusCode, resp.Status = c.status, fmt.Sprintf("%d %s", c.status, http.StatusText(c.status))
	b := &simRespBody{content: data, ctx: req.Context(), cutAt: -1, stallAt: -1, closed: make(chan struct{}),
		answered: time.Now()}
	if cut && c.n <= 30 && len(data) > 0 {
		b.cutAt = rng.IntN(len(data))
		b.cutErr = pick[error](rng, io.ErrUnexpectedEOF,
			&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
		// The last bytes with the cut, but not where the Transport may read
		// the body other than for the caller (a drain, a buffer).
		b.withData = rng.IntN(2) == 0 && resp.Header.Get("X-Sim-Again") == "" && !r.pol.buffered
		b.onCut = func(n int) { s.cutWithData(r, c, n) }
		s.count("resumable body cut")
	}
	resp.ContentLength = int64(len(data))
	if !c.ranged && r.res.unknown {
		resp.ContentLength = -1
	}
	resp.Body, c.body, c.content = b, b, data
	s.count(fmt.Sprintf("resumable body: %s, %s", resNames[r.res.kind], c.served))
}

// resumableFault answers half the first requests for a resumable body
// (no Range) that drew a fault: so that more bodies are served, and cut.
func (s *sim) resumableFault(req *http.Request, r *simReq, c *simCall) {
	if r.res != nil && req.Method == http.MethodGet && !c.ranged && c.fault != faultNone &&
		s.raceRand(r, c, 16).IntN(2) == 0 {
		c.fault = faultNone
	}
}

// cutWithData records the n bytes a cut of answer c gave with its error
// as the caller's, if the caller reads them: those of the answer returned
// or of a resume.
func (s *sim) cutWithData(r *simReq, c *simCall, n int) {
	s.drawMu.Lock()
	reading := r.readG != ""
	s.drawMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if reading && (c.ranged || c.resp == r.resp) {
		r.pending = n
	}
}

// serveRange answers resume c as drawn (see resumableAnswer), setting its
// status, served and header h; it returns the bytes to send, and whether
// to cut them.
func (s *sim) serveRange(rng *rand.Rand, req *http.Request, r *simReq, c *simCall, h http.Header) ([]byte, bool) {
	from := -1
	fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-", &from)
	full, size, v := c.full, len(c.full), c.version
	x := rng.IntN(20)
	if c.n > 30 {
		x = 19 // recovered: as it should
	}
	if from < 0 {
		x = 0 // a Range it cannot read: ignored
	}
	rest := func(status int, data []byte, served, first, last, total string) ([]byte, bool) {
		c.status, c.served = status, served
		h.Set("Content-Range", "bytes "+first+"-"+last+"/"+total)
		return data, false
	}
	itoa := func(n int) string { return fmt.Sprint(n) }
	switch {
	case x == 0:
		c.served = "Range ignored"
		return full, false
	case x == 1 && r.res.kind == resStrong && from < size:
		other := r.res.content(s.seed, r.id, v+1)
		h.Set("ETag", r.res.validator(v+1))
		return rest(http.StatusPartialContent, other[from:], "206 of another version", itoa(from), itoa(size-1), itoa(size))
	case x == 2 && from+1 < size:
		return rest(http.StatusPartialContent, full[from+1:], "206 a byte late", itoa(from+1), itoa(size-1), itoa(size))
	case x == 3 && from > 0:
		return rest(http.StatusPartialContent, full, "206 from 0", "0", itoa(size-1), itoa(size))
	case x == 4 && from+1 < size:
		return rest(http.StatusPartialContent, full[from:size-1], "206 short of the end", itoa(from), itoa(size-2), itoa(size))
	case x == 5 && from < size:
		h.Set("Content-Encoding", "gzip")
		return rest(http.StatusPartialContent, full[from:], "206 coded", itoa(from), itoa(size-1), itoa(size))
	case req.Header.Get("If-Range") != r.res.validator(v) || r.res.validator(v) == "":
		c.served = "whole, the If-Range not met"
		return full, false
	case from >= size:
		c.status, c.served = http.StatusRequestedRangeNotSatisfiable, "416"
		h.Set("Content-Range", "bytes */"+itoa(size))
		return nil, false
	}
	if rng.IntN(4) == 0 {
		h.Del("ETag") // (If-Range vouches for it)
	}
	data, _ := rest(http.StatusPartialContent, full[from:], "rest", itoa(from), itoa(size-1), itoa(size))
	return data, rng.IntN(3) == 0
}

// checkResume: of a request whose host serves resumable bodies, the bytes
// the caller read are a prefix of the body first served, the whole body if
// the read ended without an error (checkResult); a resume went only after
// a first answer that allowed it, under ResumeResponse, each asking for the
// rest from the bytes the caller was given, if the body still was what the
// first answer's validator named, as sent (checkResumeAsked); none went past
// the deadline, nor past MaxAttempts; an answer that was not the rest ended
// the read with an *Error; and the timeline and the hooks saw each resume
// (checkResumeTold).
func (s *sim) checkResume(r *simReq) {
	if !s.cfg.resumable || r.panicked != nil {
		return
	}
	if r.readCut && r.readEnd.Sub(r.end) > simReadFor {
		// A Close from another goroutine aborts a resume under way: its
		// wait, and its attempt, end with it.
		s.violate(r, "the caller closed the body %v after the call returned, and its read ended %v after",
			simReadFor, r.readEnd.Sub(r.end))
	}
	first := r.callOf(r.resp)
	if first != nil && first.full != nil && !bytes.HasPrefix(first.full, r.got) {
		s.violate(r, "the caller read %d bytes that are not the first of the body its host served first "+
			"(version %d, %d bytes)", len(r.got), first.version, len(first.full))
	}
	if len(r.resumeAttempts) == 0 && len(r.resumeCalls) == 0 {
		s.checkResumeTold(r)
		return
	}
	s.figures["requests resumed"]++ // (s.mu is held)
	s.figures["resumes"] += len(r.resumeAttempts)
	switch {
	case !r.pol.resume:
		s.violate(r, "%d resumes, though ResumeResponse is off", len(r.resumeAttempts))
	case first == nil || first.full == nil || !r.res.allows() || r.method != http.MethodGet:
		s.violate(r, "%d resumes of an answer that allows none (%s)", len(r.resumeAttempts), r.lastServed(first))
	}
	s.checkResumeAsked(r, first)
	limit := r.pol.max
	switch {
	case r.sdkAttempt >= 2:
		limit = 1
	case r.prior > 0:
		limit = max(r.pol.max-r.prior, 1)
	}
	if n := len(r.attempts) + len(r.resumeAttempts); n > limit {
		s.violate(r, "%d attempts, %d of them resumes; at most %d (MaxAttempts %d)", n, len(r.resumeAttempts),
			limit, r.pol.max)
	}
	for _, a := range r.resumeAttempts {
		if r.hasDeadline && !a.start.Before(r.deadlineAt) {
			s.violate(r, "resume %d went %v after the deadline", a.n, a.start.Sub(r.deadlineAt))
		}
		if r.cancelAt > 0 && a.start.After(r.start.Add(r.cancelAt)) {
			s.violate(r, "resume %d went %v after the caller canceled", a.n, a.start.Sub(r.start.Add(r.cancelAt)))
		}
	}
	s.checkResumeEnd(r)
	s.checkResumeTold(r)
}

// lastServed describes the answer c, for a message.
func (r *simReq) lastServed(c *simCall) string {
	if c == nil || c.full == nil {
		return "not a resumable body"
	}
	return fmt.Sprintf("%s, %s, status %d", resNames[r.res.kind], c.served, c.status)
}

// checkResumeAsked: each resume asked for the rest from the bytes the
// caller's reads had been given (with those a cut gave with its error),
// if the body was still the one the first answer's validator names, as
// sent (Accept-Encoding: identity).
func (s *sim) checkResumeAsked(r *simReq, first *simCall) {
	if first == nil || first.full == nil {
		return
	}
	validator := r.res.validator(first.version)
	for _, c := range r.resumeCalls {
		rng, ifRange, coding := c.header.Get("Range"), c.header.Get("If-Range"), c.header.Get("Accept-Encoding")
		switch want := fmt.Sprintf("bytes=%d-", c.wantFrom); {
		case rng != want:
			s.violate(r, "resume %d.%d asked Range %q; the caller had been given %d bytes", c.n, c.dup, rng, c.wantFrom)
		case ifRange != validator:
			s.violate(r, "resume %d.%d asked If-Range %q; the first answer's validator is %q", c.n, c.dup, ifRange,
				validator)
		case coding != "identity":
			s.violate(r, "resume %d.%d asked Accept-Encoding %q, not identity", c.n, c.dup, coding)
		}
	}
}

// checkResumeEnd: a last resume answered with what is not the rest of the
// body (the attempt's outcome that answer, taken as it came: no error
// beside it, no Retryable, no cancellation as it came) ends the read with
// an *Error, ReasonNotTransient.
func (s *sim) checkResumeEnd(r *simReq) {
	c := r.resumeCalls[len(r.resumeCalls)-1]
	if c.full == nil || c.served == "rest" || c.fault != faultNone || r.pol.judged || r.canceledAtAnswer {
		return
	}
	taken := false
	for _, a := range r.resumeAttempts {
		taken = taken || (a.resp == c.resp && a.resp != nil && a.err == nil)
	}
	if !taken {
		return
	}
	var e *retryhttp.Error
	if !errors.As(r.readErr, &e) || e.Reason != retryhttp.ReasonNotTransient {
		s.violate(r, "the last resume was answered %q (status %d); the read ended with %v, not an *Error "+
			"(ReasonNotTransient)", c.served, c.status, r.readErr)
	}
}

// checkResumeTold: with the policy's timeline, Timeline, read once the
// body was, has an entry for each attempt, resumes included, each sent
// when the base got it, with the answer the base returned; if a resume
// went, the entry of the answer returned holds the cut as its error, and
// keeps its response. OnRetry heard of each resume, before it went (the
// last maybe not sent: its wait or PrepareRetry ended the read), and
// OnGiveUp once at most, as the read's *Error says.
func (s *sim) checkResumeTold(r *simReq) {
	if tl := retryhttp.Timeline(r.resp, r.err); r.pol.timeline {
		if len(tl) != len(r.attempts)+len(r.resumeAttempts) {
			s.violate(r, "the timeline, once the body was read, has %d attempts; the base got %d and %d resumes",
				len(tl), len(r.attempts), len(r.resumeAttempts))
			return
		}
		for _, a := range r.resumeAttempts {
			e := tl[a.n-1]
			if e.Number != a.n || !e.Start.Equal(a.start) || (a.done && a.err == nil && e.Response != a.resp) {
				s.violate(r, "timeline entry %d (attempt %d) is not the resume the base got", a.n, e.Number)
				return
			}
		}
		for _, e := range tl {
			if e.Response != nil && e.Response == r.resp && len(r.resumeAttempts) > 0 &&
				(e.Err == nil || !strings.Contains(e.Err.Error(), "response body cut after")) {
				s.violate(r, "timeline entry %d, whose body broke and was resumed, has error %v", e.Number, e.Err)
			}
		}
	}
	if !s.cfg.hooks {
		return
	}
	n := len(r.resumeAttempts)
	if len(r.resumeRetries) < n || len(r.resumeRetries) > n+1 {
		s.violate(r, "OnRetry heard of %d retries while the body was read; %d resumes went", len(r.resumeRetries), n)
	}
	var e *retryhttp.Error
	switch isErr := errors.As(r.readErr, &e); {
	case len(r.resumeGiveUps) > 1:
		s.violate(r, "OnGiveUp heard %d times while the body was read", len(r.resumeGiveUps))
	case isErr && (len(r.resumeGiveUps) != 1 || r.resumeGiveUps[0].Reason != e.Reason):
		s.violate(r, "the read ended with an *Error (%v), OnGiveUp heard %d times", e.Reason, len(r.resumeGiveUps))
	}
}

// readingBody reports whether the calling goroutine reads r's response
// body, past RoundTrip: what the Transport does there resumes the body.
func (s *sim) readingBody(r *simReq) bool {
	if !s.cfg.resumable {
		return false
	}
	g := goroutine()
	s.drawMu.Lock()
	defer s.drawMu.Unlock()
	return r.readG == g
}

// resumedAt reports whether a request to host before r may have resumed
// its body, or had a cut judged: the budget heard of attempts and failures
// the checks that model it (checkBudgetOwed, checkLineRefusal) do not see.
func (s *sim) resumedAt(host string, r *simReq) bool {
	for _, q := range s.reqs {
		if q.req != nil && q.req.URL.Host == host && q.pol.resume && q.res != nil && q != r {
			return true
		}
	}
	return false
}

// traceResumes adds to the trace what r's body served, and its resumes.
func (s *sim) traceResumes(r *simReq) {
	if r.res == nil {
		return
	}
	since := func(t time.Time) time.Duration { return t.Sub(r.start) }
	if c := r.callOf(r.resp); c != nil && c.body != nil {
		s.log = append(s.log, fmt.Sprintf("  body: %s, %d bytes, version %d, cut at %d (%v, with data %v), read %d, given %d",
			resNames[r.res.kind], len(c.content), c.version, c.body.cutAt, c.body.cutErr, c.body.withData, len(r.got),
			r.given))
	}
	for _, c := range r.resumeCalls {
		cutAt := -1
		if c.body != nil {
			cutAt = c.body.cutAt
		}
		s.log = append(s.log, fmt.Sprintf("  resume %d.%d at %v: Range %q (given %d), If-Range %q: %s, status %d, %s, "+
			"%d bytes, cut at %d", c.n, c.dup, since(c.start), c.header.Get("Range"), c.wantFrom, c.header.Get("If-Range"),
			faultNames[c.fault], c.status, c.served, len(c.content), cutAt))
	}
	for _, e := range r.resumeRetries {
		s.log = append(s.log, fmt.Sprintf("  OnRetry at %v, reading: after attempt %d, delay %v (%s): %v", since(e.at),
			e.Attempt, e.Delay, e.Source, e.Err))
	}
	for _, g := range r.resumeGiveUps {
		s.log = append(s.log, fmt.Sprintf("  OnGiveUp, reading: %v after %d attempts: %v", g.Reason, g.Attempts, g.Err))
	}
}

// checkResumeStats: Stats.Resumes counts the resumes the hosts got (each
// retry sent while a body was read asked for the rest of it).
func (s *sim) checkResumeStats() {
	st := s.tr.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	resumes := 0
	for _, r := range s.reqs {
		resumes += len(r.resumeCalls)
	}
	if st.Resumes != uint64(resumes) {
		s.violate(nil, "Stats: %d resumes; the hosts were asked for the rest of a body %d times", st.Resumes, resumes)
	}
}
