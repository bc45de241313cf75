package sim

// The invariant of issue 48 on the budget's line: a retry it refuses was
// refused while its host's last outcome was a failure.

import (
	"fmt"
	"time"

	"github.com/retryhttp/retryhttp"
)

// checkLineRefusal: a retry that waited in its host's line and was refused
// for the budget was refused while the host's last outcome was a failure
// (Budget: when a retry's time in line runs out, it "goes if the host's
// last answer was a success, else is refused"). The refusal came through
// the line when OnGiveUp's BudgetWait is longer than the waits in line
// OnRetry reported. A success is the answer a request returned without
// giving up on, its caller's context lasting, at its attempt's end (when
// the budget hears of it, but for requests hedged, judged or buffered,
// whose successes are not counted); any other attempt that came back is a
// failure, heard of by the latest time the budget may hear of it (see
// heardBy). A success before the refusal must be followed by a failure.
func (s *sim) checkLineRefusal(r *simReq) {
	if !s.cfg.hooks || r.panicked != nil || r.pastHorizon || s.cfg.nest != nestNone || s.cfg.sizes.unlimited ||
		len(r.giveUps) != 1 || r.giveUps[0].Reason != retryhttp.ReasonBudget {
		return
	}
	var inLine time.Duration
	for _, e := range r.retries {
		inLine += e.BudgetWait
	}
	if r.giveUps[0].BudgetWait <= inLine {
		return // refused before the line
	}
	host := r.req.URL.Host
	if s.resumedAt(host, r) {
		return
	}
	var success, failure time.Time
	var by *simReq
	for _, q := range s.reqs {
		if q.req == nil || q.req.URL.Host != host {
			continue
		}
		exact := !q.pol.hedge && !q.pol.judged && !q.pol.buffered
		for _, a := range q.attempts {
			switch {
			case !a.done || a.end.After(r.end):
			case exact && q.succeededWith(a):
				if a.end.Before(r.end) && !a.end.Before(success) {
					success, by = a.end, q
				}
			case q.heardBy(a, exact).After(failure):
				failure = q.heardBy(a, exact)
			}
		}
	}
	if by != nil && failure.Before(success) {
		s.violate(r, "refused a retry for the budget %v after its start, after %v in the host's line "+
			"(%s first), though the host's last outcome before, request %d's answer %v after this one's start, "+
			"was a success", r.end.Sub(r.start), r.giveUps[0].BudgetWait-inLine, r.lastBody(),
			by.id, success.Sub(r.start))
	}
}

// heardBy returns the latest time the budget may hear of attempt a of q,
// which failed: at its end, or, where a Retryable, hedging or a buffered
// body come between (not exact), before q's next attempt or end.
func (q *simReq) heardBy(a *simAttempt, exact bool) time.Time {
	if exact {
		return a.end
	}
	by := q.end
	for _, b := range q.attempts {
		if b.start.After(a.end) && b.start.Before(by) {
			by = b.start
		}
	}
	return by
}

// succeededWith reports whether attempt a of q was a success of its host:
// the answer q returned without giving up on it, its context not ended.
func (q *simReq) succeededWith(a *simAttempt) bool {
	return q.resp != nil && a.resp == q.resp && q.err == nil && len(q.giveUps) == 0 && !q.contextEnded(q.end)
}

// lastBody describes the body of r's last failed answer, which a retry
// waiting in line reads into memory first.
func (r *simReq) lastBody() string {
	if len(r.calls) == 0 {
		return "no answer"
	}
	switch b := r.calls[len(r.calls)-1].body; {
	case b == nil:
		return "no body to read"
	case b.stallAt >= 0:
		return fmt.Sprintf("its failed answer's body read, which stalls %v after %d bytes", b.stall, b.stallAt)
	}
	return "its failed answer's body read"
}
