package sim

// The invariants of issue 48 on what a request reports (a failure
// returned is given up on, once) and on what a Transport keeps of a host
// while a request to it is in flight.

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp"
)

// retryStatus reports whether the policy of request r retries status code,
// as Policy.Statuses says (DefaultStatuses when no layer sets a list; a
// keyed request's 409 aside).
func (r *simReq) retryStatus(code int) bool {
	statuses := r.pol.statuses
	if statuses == nil {
		statuses = retryhttp.DefaultStatuses()
	}
	return slices.Contains(statuses, code)
}

// checkReported: a failure returned is reported, once. A response whose
// status the policy retries is a failure (retries.md: a request given up on
// returns the last response, a retryable status; errors.go: a status the
// policy does not retry is no failure), whatever ended the request, the
// caller's cancellation as the answer came included: OnGiveUp was told of
// it once (so Stats.GiveUps counts it once: checkStats), and StopReason
// says why. (An error returned is checked by checkGiveUp: OnGiveUp, and
// its *Error's Reason.)
func (s *sim) checkReported(r *simReq) {
	if r.panicked != nil || r.resp == nil || !r.retryStatus(r.resp.StatusCode) {
		return
	}
	ended := fmt.Sprintf("the caller's context had ended: %v; it canceled as an answer came: %v",
		r.contextEnded(r.end), r.canceledAtAnswer)
	if s.cfg.hooks && len(r.giveUps) != 1 {
		s.violate(r, "a failure returned (status %d after %d attempts) reached OnGiveUp %d times (%s)",
			r.resp.StatusCode, len(r.attempts), len(r.giveUps), ended)
	}
	if got := retryhttp.StopReason(r.resp); got == 0 && s.cfg.nest == nestNone {
		s.violate(r, "a failure returned (status %d after %d attempts) has no StopReason (%s)",
			r.resp.StatusCode, len(r.attempts), ended)
	}
}

// checkHostKept: a host with a request in flight is not forgotten, however
// many other hosts come (Transport: past 1024 hosts, those with no request
// in flight are forgotten). Request 1 of a crowd seed was in flight while
// simCrowd other hosts were requested (see sendCrowd): its host's counters
// (TrackHosts) still count it, in the Transport under test and in one
// beneath it, whose requests are the attempts of the one above.
func (s *sim) checkHostKept(r *simReq) {
	if !s.crowded || r.id != 1 || r.panicked != nil || r.req == nil {
		return
	}
	host, n := r.req.URL.Host, uint64(len(r.attempts))
	check := func(what string, tr *retryhttp.Transport, want retryhttp.Stats) {
		if got := tr.HostStats()[host]; got.Requests != want.Requests || got.Attempts != want.Attempts {
			s.violate(r, "%s forgot host %s, which had a request in flight while %d other hosts were requested: "+
				"HostStats counts %d requests and %d attempts; sent %d and %d",
				what, host, simCrowd, got.Requests, got.Attempts, want.Requests, want.Attempts)
		}
	}
	check("the Transport", s.tr, retryhttp.Stats{Requests: 1, Attempts: n})
	if s.cfg.nest == nestBase {
		check("the Transport beneath", s.inner, retryhttp.Stats{Requests: n, Attempts: n})
	}
}

// simVerdict is an outcome a Retryable saw: a response, or an error.
type simVerdict struct {
	resp *http.Response
	err  bool
}

// retriesMade returns how many retries (not hedges) OnRetry was told of
// for r. Requires s.mu held.
func (r *simReq) retriesMade() int {
	n := 0
	for _, e := range r.retries {
		if !e.Hedge {
			n++
		}
	}
	return n
}

// traceDetail adds to the trace of a replayed seed what request r's
// attempts, calls, OnRetry and Retryable saw, in time from its start.
// Requires s.mu held.
func (s *sim) traceDetail(r *simReq) {
	since := func(t time.Time) time.Duration { return t.Sub(r.start) }
	s.log = append(s.log, fmt.Sprintf("  request %d, from %v after the first's start:", r.id, r.start.Sub(s.reqs[0].start)))
	for _, a := range r.attempts {
		status := 0
		if c := r.callOf(a.resp); c != nil {
			status = c.status
		}
		s.log = append(s.log, fmt.Sprintf("  attempt %d: %v to %v, status %d, error %v", a.n, since(a.start),
			since(a.end), status, a.err))
	}
	for _, c := range r.calls {
		s.log = append(s.log, fmt.Sprintf("  call %d.%d at %v: %s, status %d, hint %s", c.n, c.dup, since(c.start),
			faultNames[c.fault], c.status, c.hint.name))
	}
	for _, e := range r.retries {
		s.log = append(s.log, fmt.Sprintf("  OnRetry at %v: after attempt %d, hedge %v, delay %v (%s), %v in line",
			since(e.at), e.Attempt, e.Hedge, e.Delay, e.Source, e.BudgetWait))
	}
	for _, g := range r.giveUps {
		s.log = append(s.log, fmt.Sprintf("  OnGiveUp: %v after %d attempts, %v in line", g.Reason, g.Attempts, g.BudgetWait))
	}
	for _, v := range r.verdicts {
		status := 0
		if v.resp != nil {
			status = v.resp.StatusCode
		}
		s.log = append(s.log, fmt.Sprintf("  Retryable saw status %d, error %v", status, v.err))
	}
	for _, e := range r.timeline {
		s.log = append(s.log, fmt.Sprintf("  timeline at %v: %v, retry %v", since(e.Start), e, e.Retry))
	}
	s.traceResumes(r)
}
