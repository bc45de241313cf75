package sim

// The invariants the simulation checks after each request: what RoundTrip
// returned and what the caller read, the deadline, the attempts made,
// what the server got (never an unkeyed non-idempotent request twice, never
// a truncated body), every body closed exactly once, the caller's request
// unchanged, and nothing left running. The give-ups, retries and Stats are
// checked in verdict_test.go.

import (
	"bytes"
	"errors"
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// check checks every invariant of request r, which has ended, and whose
// world has settled.
func (s *sim) check(r *simReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkResult(r)
	s.checkTime(r)
	s.checkAttempts(r)
	s.checkServer(r)
	s.checkBodies(r)
	s.checkUnchanged(r)
	s.checkGiveUp(r)
	s.checkRetries(r)
	s.checkRaceWaits(r)
	s.checkSchedule(r)
	s.checkStatuses(r)
	s.checkBudgetOwed(r)
	s.checkReported(r)
	s.checkHostKept(r)
	s.checkBackoffN(r)
	s.checkHedgesGo(r)
	s.checkJudged(r)
	s.checkLineRefusal(r)
	s.checkHostWait(r)
	s.checkTimeline(r)
	s.checkResume(r)
	s.checkLeaks(r)
	if *simSeed != 0 {
		s.traceDetail(r)
	}
}

// checkResult: a response or an error, never both or neither; a response
// is one the server sent, with its status, the body read whole or failing
// (never cut short with a clean end), and Attempts naming its attempt.
func (s *sim) checkResult(r *simReq) {
	if r.panicked != nil {
		return
	}
	if (r.resp == nil) == (r.err == nil) {
		s.violate(r, "RoundTrip returned response %v and error %v: exactly one must be nil", r.resp, r.err)
		return
	}
	if r.resp == nil {
		return
	}
	resp := r.resp
	if resp.Body == nil || resp.Request == nil {
		s.violate(r, "a response without a Body (%v) or a Request (%v)", resp.Body, resp.Request)
	}
	c := r.callOf(resp)
	if c == nil {
		s.violate(r, "RoundTrip returned a response the server never sent")
		return
	}
	if resp.StatusCode != c.status {
		s.violate(r, "status %d returned, the server sent %d", resp.StatusCode, c.status)
	}
	switch {
	case r.readErr == nil && r.partial > 0 && !bytes.HasPrefix(c.content, r.got):
		s.violate(r, "the first %d bytes read are not the server's", len(r.got))
	case r.readErr == nil && r.partial == 0 && !bytes.Equal(r.got, c.content):
		s.violate(r, "a body of %d bytes read to its end, the server's has %d: a truncated body was accepted",
			len(r.got), len(c.content))
	case errors.Is(r.readErr, errSimClosed) && !r.readCut:
		s.violate(r, "the body returned was closed before the caller read it: %v", r.readErr)
	}
	n := retryhttp.Attempts(resp)
	for _, a := range r.attempts {
		// Through an SDK's client, a nested Transport may have retried
		// within the first attempt: its result comes back as it is.
		if a.resp == resp && (n < a.n || (n > a.n && s.cfg.nest != nestSDK)) {
			s.violate(r, "Attempts(resp) = %d, the response came from attempt %d", n, a.n)
		}
	}
}

// callOf returns the server's call that sent resp, or nil.
func (r *simReq) callOf(resp *http.Response) *simCall {
	for _, c := range r.calls {
		if c.resp == resp && resp != nil {
			return c
		}
	}
	return nil
}

// checkTime: never past the caller's deadline, nor long after its
// cancellation; no attempt but the first at or past either.
func (s *sim) checkTime(r *simReq) {
	if r.hasDeadline && r.end.After(r.deadlineAt) {
		s.violate(r, "RoundTrip returned %v past the deadline", r.end.Sub(r.deadlineAt))
	}
	if r.hasDeadline && r.readEnd.After(r.deadlineAt) && !r.readCut && !r.deaf {
		s.violate(r, "the response body's read ended %v past the deadline", r.readEnd.Sub(r.deadlineAt))
	}
	canceled := r.start.Add(r.cancelAt)
	if r.cancelAt > 0 && r.end.After(canceled) {
		s.violate(r, "RoundTrip returned %v after the caller canceled", r.end.Sub(canceled))
	}
	for i, a := range r.attempts {
		if i == 0 {
			continue
		}
		if r.hasDeadline && !a.start.Before(r.deadlineAt) {
			s.violate(r, "attempt %d started %v after the deadline", a.n, a.start.Sub(r.deadlineAt))
		}
		if r.cancelAt > 0 && a.start.After(canceled) {
			s.violate(r, "attempt %d started %v after the caller canceled", a.n, a.start.Sub(canceled))
		}
	}
}

// checkAttempts: no more attempts than the policy (or a layer above)
// allows, numbered 1 to n, and the server got each once (a nested
// Transport's retries within the first attempt aside).
func (s *sim) checkAttempts(r *simReq) {
	n := len(r.attempts)
	ns := make([]int, 0, n)
	for _, a := range r.attempts {
		ns = append(ns, a.n)
	}
	slices.Sort(ns)
	for i, m := range ns {
		if m != i+1 {
			s.violate(r, "attempts numbered %v", ns)
			break
		}
	}
	if r.panicked != nil {
		return
	}
	switch {
	case n > r.pol.max:
		s.violate(r, "%d attempts, MaxAttempts %d", n, r.pol.max)
	case r.sdkAttempt >= 2 && n > 1:
		s.violate(r, "%d attempts of an SDK's retry (attempt %d)", n, r.sdkAttempt)
	case r.prior > 0 && n > max(r.pol.max-r.prior, 1):
		s.violate(r, "%d attempts of a key that had %d already, MaxAttempts %d", n, r.prior, r.pol.max)
	}
	switch calls := len(r.calls); {
	case s.cfg.nest != nestSDK && calls != n:
		s.violate(r, "the server got %d calls for %d attempts", calls, n)
	case s.cfg.nest == nestSDK && calls > max(r.innerMax, r.pol.max):
		s.violate(r, "the server got %d calls through a nested Transport (MaxAttempts %d over %d)",
			calls, r.pol.max, r.innerMax)
	}
}

// wireKey returns the idempotency key a server reads in h (under the
// policy's header or the usual names, in any letter case, trimmed), or "".
func wireKey(h http.Header, keys *retryhttp.IdempotencyKeys) string {
	names := []string{"Idempotency-Key", "X-Idempotency-Key"}
	if keys != nil && keys.Header != "" {
		names = append([]string{textproto.CanonicalMIMEHeaderKey(keys.Header)}, names...)
	}
	for _, name := range names {
		for spelling, values := range h {
			if !strings.EqualFold(spelling, name) {
				continue
			}
			for _, v := range values {
				if v = textproto.TrimString(v); v != "" {
					return v
				}
			}
		}
	}
	return ""
}

// checkServer: an unkeyed non-idempotent request reaches the server once
// at most; keys are the caller's, or one the Transport added to every
// attempt; every body the server read whole is the caller's body.
func (s *sim) checkServer(r *simReq) {
	var reached []string
	for _, c := range r.calls {
		if c.reached {
			reached = append(reached, wireKey(c.header, r.pol.keys))
		}
	}
	if !idempotentMethod(r.method) && len(reached) > 1 {
		for _, k := range reached {
			if k == "" || k != reached[0] {
				s.violate(r, "a non-idempotent request reached the server %d times, keys %q: it may be applied twice",
					len(reached), reached)
				break
			}
		}
	}
	first := ""
	// No key where no retry can follow: an SDK's retry, marked by its
	// attempt header, is sent once (the SDK does the retrying).
	keyed := r.pol.keysFor(r.method) && r.sdkAttempt < 2
	for i, c := range r.calls {
		k := wireKey(c.header, r.pol.keys)
		switch {
		case r.callerKey != "" && k != r.callerKey:
			s.violate(r, "call %d carries key %q, the caller's is %q", c.n, k, r.callerKey)
		case r.callerKey == "" && keyed && k == "":
			s.violate(r, "keys are on for %s, but call %d carries none", r.method, c.n)
		case r.callerKey == "" && keyed && i > 0 && k != first && s.cfg.nest != nestSDK:
			s.violate(r, "call %d carries key %q, the first %q", c.n, k, first)
		case r.callerKey == "" && !keyed && k != "" && s.cfg.nest == nestNone:
			s.violate(r, "call %d carries key %q, though neither the caller nor the policy set one (SDK attempt %d)",
				c.n, k, r.sdkAttempt)
		}
		if i == 0 {
			first = k
		}
		switch {
		case c.sentErr != nil:
			s.violate(r, "reading the request body of call %d.%d failed: %v", c.n, c.dup, c.sentErr)
		case c.sentDone && !bytes.Equal(c.sent, r.payload):
			s.violate(r, "call %d.%d got a body of %d bytes, the caller's has %d", c.n, c.dup, len(c.sent), len(r.payload))
		}
	}
}

// checkBodies: the caller's body, every body GetBody made, and every
// response body the server sent are closed exactly once.
func (s *sim) checkBodies(r *simReq) {
	for i, b := range r.bodies {
		if n := b.closes.Load(); n != 1 {
			what := "the caller's request body"
			if i > 0 {
				what = "a request body GetBody made"
			}
			s.violate(r, "%s was closed %d times", what, n)
		}
	}
	returned := r.callOf(r.resp)
	for _, c := range append(r.calls[:len(r.calls):len(r.calls)], r.resumeCalls...) {
		if c.body != nil && c.body.closes.Load() != 1 {
			s.violate(r, "the response body of call %d.%d (status %d) was closed %d times", c.n, c.dup, c.status,
				c.body.closes.Load())
			continue
		}
		// A body the Transport drained or closed, by the deadline (or at
		// once, for an answer that came after it).
		if c.body != nil && c != returned && !c.ranged && r.hasDeadline && r.panicked == nil &&
			time.Unix(0, c.body.closedAt.Load()).After(later(r.deadlineAt, c.body.answered)) {
			s.violate(r, "the response body of call %d.%d (status %d) was closed %v past the deadline",
				c.n, c.dup, c.status, time.Unix(0, c.body.closedAt.Load()).Sub(r.deadlineAt))
		}
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// checkUnchanged: the caller's request is as it was before RoundTrip.
func (s *sim) checkUnchanged(r *simReq) {
	req, was := r.req, r.snap
	now := snapshot(req)
	switch {
	case now.method != was.method, now.host != was.host, now.proto != was.proto, now.close != was.close:
		s.violate(r, "the caller's request changed: method, host, proto or close")
	case now.url != was.url || *req.URL != was.urlValue:
		s.violate(r, "the caller's URL changed: %v, was %v", req.URL, &was.urlValue)
	case now.headerMap != was.headerMap || !reflect.DeepEqual(now.header, was.header):
		s.violate(r, "the caller's header changed: %v, was %v", req.Header, was.header)
	case now.contentLength != was.contentLength, now.body != was.body, now.getBody != was.getBody:
		s.violate(r, "the caller's body, GetBody or ContentLength changed")
	case now.ctx != was.ctx:
		s.violate(r, "the caller's context changed")
	}
}

// checkLeaks: once a request is over and its body closed, no goroutine of
// the Transport is left (a context it made and never canceled shows as
// one, under a testutil.OpaqueCtx), nor a timer, nor a drain on its watch.
func (s *sim) checkLeaks(r *simReq) {
	if s.cfg.concurrent && r != s.reqs[len(s.reqs)-1] {
		return // checked once, after the last
	}
	if leaks := s.leaks(); len(leaks) > 0 {
		s.violate(r, "%d goroutines left, the first:\n%s", len(leaks), leaks[0])
	}
	if s.clk != nil && !r.pastHorizon {
		if left := s.clk.Left(); len(left) > 0 {
			s.violate(r, "timers left: %v", left)
		}
	}
}

// checkSchedule: the budget holds no request past its policy's schedule.
// The time it spent outside its attempts (in its backoffs, the budget's
// line and drains) is no more than the longest waits its Backoff can draw
// for every retry the policy allows (its Delay for the largest sample
// below 1, chained), the waits its server asked for, with their jitter
// (MaxRetryAfter and a second each at most), the time a failed body's
// drain may take past each retry's wait (respbody.MinTime), its caller's body's
// stall, the time its policy's Retryable took (a peek at a stalled body is
// its attempt's own time), and, for each attempt it did not make, as long
// as its longest.
func (s *sim) checkSchedule(r *simReq) {
	if r.panicked != nil || r.pastHorizon || r.pol.hedge || r.pol.buffered || s.cfg.panicHook == "Backoff" ||
		r.pol.max > simScheduleRetries || len(r.attempts) == 0 || s.cfg.nest != nestNone {
		return
	}
	var e *retryhttp.Error
	if len(r.attempts) < 2 && !(errors.As(r.err, &e) && e.Reason == retryhttp.ReasonBudget) {
		return // it never waited for a retry (its body, its admission take their own time)
	}
	allow, longest := time.Duration(0), time.Duration(0)
	add := func(d time.Duration) { allow = min(allow+min(max(d, 0), simFarAway), simFarAway) }
	for n := range r.pol.max - 1 {
		longest = max(r.pol.backoff.Delay(n, longest, 0x1p0-0x1p-53), 0)
		add(longest)
		add(respbody.MinTime) // a drain past the wait (see respbody.Time)
	}
	outside := r.end.Sub(r.start)
	var attempt time.Duration
	for _, a := range r.attempts {
		attempt = max(attempt, a.end.Sub(a.start))
		outside -= a.end.Sub(a.start)
	}
	for _, c := range r.calls {
		if c.hint.valid {
			add(min(r.pol.maxRA, simFarAway) + time.Second)
		}
	}
	for range r.pol.max - len(r.attempts) {
		add(attempt)
	}
	add(r.pause)
	add(r.judging)
	if first := r.attemptN(1); first != nil && r.pol.hostWait > 0 {
		add(first.start.Sub(r.start)) // held by its host's wait (HostWait)
	}
	if outside > allow+time.Millisecond {
		s.violate(r, "it spent %v outside its attempts, past its schedule of %v", outside, allow)
	}
}

// simScheduleRetries bounds the MaxAttempts of the requests whose schedule
// checkSchedule sums, one Backoff call a retry.
const simScheduleRetries = 64

// checkStatuses: a Statuses list a layer sets is the whole list: a 409,
// which a keyed request also retries when Statuses is left to its
// defaults, is not retried when the list leaves it out (unless the
// server or Retryable asks for another attempt).
func (s *sim) checkStatuses(r *simReq) {
	if r.panicked != nil || r.pol.statuses == nil || slices.Contains(r.pol.statuses, http.StatusConflict) ||
		r.pol.judged || r.pol.hedge || r.pol.buffered || s.cfg.nest != nestNone {
		return
	}
	last := 0
	for _, c := range r.calls {
		last = max(last, c.n)
	}
	for _, c := range r.calls {
		if c.resp == nil || c.status != http.StatusConflict || strings.EqualFold(c.resp.Header.Get("X-Should-Retry"), "true") {
			continue
		}
		if c.n < last {
			s.violate(r, "the 409 of attempt %d was retried under Statuses %v", c.n, r.pol.statuses)
		}
	}
}
