package sim

// The invariants of issue 48 on hedged requests: a Backoff counts retries,
// not hedges; hedges keep going until an answer asks for a wait; and
// Policy.Retryable sees every attempt's outcome, hedges' included.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
)

// simLargestSample is the largest uniform sample below 1: a Backoff called
// with it draws a schedule's longest wait, not a retry's.
const simLargestSample = 0x1p0 - 0x1p-53

// checkBackoffN: a Backoff drawing a retry's wait is given n, the number of
// retries already made (Backoff's doc), which OnRetry reports without
// Hedge set: hedges are no retries.
func (s *sim) checkBackoffN(r *simReq) {
	if !s.cfg.hooks || r.panicked != nil || s.cfg.nest == nestSDK { // (a Transport beneath draws from WithPolicy's too)
		return
	}
	for _, d := range r.draws {
		if d.u != simLargestSample && d.n != d.retries {
			s.violate(r, "Backoff drew a retry's wait with n = %d after %d retries (OnRetry also saw %d hedges, which are no retries)",
				d.n, d.retries, len(r.retries)-r.retriesMade())
			return
		}
	}
}

// checkHedgesGo: hedges keep going as the policy says until an answer asks
// for a wait (Hedge: they "stop once an attempt's answer asks for a
// wait"; Policy.MaxRetryAfter: a Retry-After of 0 asks for none). In a
// zero-wait seed (UnlimitedBudget, a host per request, so that neither the
// budget nor the host's fraction holds a hedge back beyond hedgeAllowance),
// hedge k+1 goes After after hedge k while the first attempt is still out,
// within MaxHedges, MaxAttempts and the caller's context, unless an answer
// that came by then won or asked for a wait (see stopsHedges), or a hedge
// could not be made (PrepareRetry or GetBody failed).
func (s *sim) checkHedgesGo(r *simReq) {
	h := r.pol.hedgeP
	// A Retryable that takes time (a Peek of a slow body) holds the
	// request's goroutine, which sends the hedges: they go late by as much.
	if r.judging > 0 {
		return
	}
	if !s.cfg.zeroWaits || !s.cfg.hooks || r.panicked != nil || r.pastHorizon || h == nil || h.After <= 0 ||
		r.pol.buffered || s.cfg.nest != nestNone || r.prepFails > 0 || r.getBodyFail > 0 || r.sdkAttempt >= 2 ||
		(r.callerKey != "" && r.prior != 0) {
		return
	}
	first := r.attemptN(1)
	if first == nil || !first.done {
		return
	}
	went := make(map[int]time.Time) // hedge k (attempt k+1) -> when OnRetry was told of it
	for _, e := range r.retries {
		if e.Hedge {
			went[e.Attempt] = e.at
		}
	}
	limit := min(hedgeAllowance(h), r.pol.max-1)
	for k := 1; k < limit; k++ {
		at, ok := went[k]
		if !ok {
			return
		}
		due := at.Add(h.After)
		if !first.end.After(due) || r.contextEnded(due) || r.stopsHedges(due) {
			return
		}
		if next, ok := went[k+1]; !ok || next.After(due) {
			s.violate(r, "hedge %d went at %v; hedge %d did not go %v later (MaxHedges %d, MaxAttempts %d), "+
				"though the first attempt was still out and no answer by then had won or asked for a wait: %s",
				k, at.Sub(r.start), k+1, h.After, h.MaxHedges, r.pol.max, r.answersBy(due))
			return
		}
	}
}

// hedgeAllowance returns how many hedges Hedge h lets one request make at
// a host that has no other request: MaxHedges (as Hedge says: 1 for zero
// or less, 16 at most), and as many as keep the host's hedges within
// Fraction of its one request (Fraction 0.05 when not above 0, 1 at most),
// plus one: 2 with a Fraction of 1, else 1.
func hedgeAllowance(h *retryhttp.Hedge) int {
	n := min(max(h.MaxHedges, 1), 16)
	if !(h.Fraction >= 1) {
		n = 1
	}
	return min(n, 2)
}

// attemptN returns attempt n of r as the Transport's base got it, or nil.
func (r *simReq) attemptN(n int) *simAttempt {
	for _, a := range r.attempts {
		if a.n == n {
			return a
		}
	}
	return nil
}

// contextEnded reports whether r's caller's context had ended at t (its
// deadline, or its cancellation).
func (r *simReq) contextEnded(t time.Time) bool {
	return (r.hasDeadline && !t.Before(r.deadlineAt)) || (r.cancelAt > 0 && !t.Before(r.start.Add(r.cancelAt))) ||
		(r.canceledAtAnswer && !t.Before(r.canceledAt))
}

// stopsHedges reports whether an answer of a hedge of r that came by t may
// end its hedges: any but a failure that neither wins nor asks for a wait.
func (r *simReq) stopsHedges(t time.Time) bool {
	for _, a := range r.attempts {
		if a.n > 1 && a.done && !a.end.After(t) && !r.plainFailure(a) {
			return true
		}
	}
	return false
}

// plainFailure reports whether attempt a failed without winning a race
// nor asking for a wait: an error, or a status the policy retries, without
// the server's advice, asking no wait, or one of 0 (a date past from the
// request's start on).
func (r *simReq) plainFailure(a *simAttempt) bool {
	if a.err != nil || a.resp == nil {
		return true
	}
	c := r.callOf(a.resp)
	if c == nil || !r.retryStatus(c.status) || c.resp.Header.Get("X-Should-Retry") != "" {
		return false
	}
	return !c.hint.valid || c.hint.waitAt(r.start) <= 0
}

// answersBy describes the answers of r's attempts that came by t.
func (r *simReq) answersBy(t time.Time) string {
	var out []string
	for _, a := range r.attempts {
		if !a.done || a.end.After(t) {
			continue
		}
		what := fmt.Sprintf("error %v", a.err)
		if c := r.callOf(a.resp); c != nil && a.err == nil {
			what = fmt.Sprintf("status %d, %s", c.status, c.hint.name)
		}
		out = append(out, fmt.Sprintf("attempt %d at %v: %s", a.n, a.end.Sub(r.start), what))
	}
	return strings.Join(out, "; ")
}

// checkJudged: Policy.Retryable sees the outcome of every attempt
// (Policy's doc; retries.md), once. Of the attempts that came back before
// the request ended (before the answer it returned came, and before its
// caller's context ended), Retryable saw each response once, the answer
// returned too, and as many errors at least as came back. (A response
// that came as its attempt timed out counts as an error: see attempt.go;
// an attempt the Transport canceled, a race's loser, did not come back.)
func (s *sim) checkJudged(r *simReq) {
	if !r.pol.judged || r.panicked != nil || r.pastHorizon || r.pol.buffered || s.cfg.nest != nestNone {
		return
	}
	seen, errs := make(map[*http.Response]int), 0
	for _, v := range r.verdicts {
		if v.resp != nil {
			seen[v.resp]++
		} else if v.err {
			errs++
		}
	}
	cutoff, returned := r.end, (*simAttempt)(nil)
	for _, a := range r.attempts {
		if a.done && a.resp != nil && a.resp == r.resp && a.end.Before(cutoff) && !r.contextEnded(a.end) {
			cutoff, returned = a.end, a // the answer returned, and those before it
		}
	}
	failed := 0
	for _, a := range r.attempts {
		switch {
		case !a.done || (a != returned && !a.end.Before(cutoff)) || r.contextEnded(a.end) ||
			errors.Is(a.err, context.Canceled):
		case a.err == nil && a.resp != nil && seen[a.resp] == 1:
		case a.err != nil || a.resp == nil || (r.pol.timeout > 0 && a.end.Sub(a.start) == r.pol.timeout):
			failed++
		default:
			c := r.callOf(a.resp)
			s.violate(r, "attempt %d's answer (status %d) came back %v after the request's start, before it ended "+
				"(%v after), and Retryable saw it %d times (%d attempts, hedged %v)", a.n, c.status,
				a.end.Sub(r.start), r.end.Sub(r.start), seen[a.resp], len(r.attempts), r.pol.hedge)
			return
		}
	}
	if errs < failed {
		s.violate(r, "%d attempts failed with an error before the request ended; Retryable saw %d errors (hedged %v)",
			failed, errs, r.pol.hedge)
	}
}
