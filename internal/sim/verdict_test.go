package sim

// The invariants of the Transport's account of a request: its give-up
// reason agrees with what happened, each retry waited what the server or
// the backoff asked, and Stats agrees with what the server counted.

import (
	"context"
	"errors"
	"maps"
	"net/textproto"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// checkGiveUp: OnGiveUp came once at most, with what RoundTrip returned;
// an *Error names the attempts made and a reason that fits the request.
func (s *sim) checkGiveUp(r *simReq) {
	if r.panicked != nil {
		return
	}
	e, isErr := r.err.(*retryhttp.Error)
	var reason retryhttp.Reason
	attempts := -1
	switch {
	case len(r.giveUps) > 1:
		s.violate(r, "OnGiveUp called %d times", len(r.giveUps))
		return
	case len(r.giveUps) == 1:
		g := r.giveUps[0]
		if g.Response != r.resp || g.Err != r.err {
			s.violate(r, "OnGiveUp was told %v, %v; RoundTrip returned %v, %v", g.Response, g.Err, r.resp, r.err)
		}
		reason, attempts = g.Reason, g.Attempts
		if isErr && (e.Reason != g.Reason || e.Attempts != g.Attempts) {
			s.violate(r, "the *Error says %v after %d, OnGiveUp %v after %d", e.Reason, e.Attempts, g.Reason, g.Attempts)
		}
	case isErr && s.cfg.hooks:
		s.violate(r, "an *Error (%v) without OnGiveUp", e)
	case r.err != nil && s.cfg.hooks:
		s.violate(r, "a failed request (%v) without OnGiveUp", r.err)
	}
	if isErr {
		reason, attempts = e.Reason, e.Attempts
		s.checkErrorWraps(r, e)
	}
	s.checkTold(r, reason)
	s.checkVerdict(r, reason, attempts)
	if reason == 0 {
		return
	}
	if attempts != len(r.attempts) {
		s.violate(r, "gave up (%v) after %d attempts, %d were sent", reason, attempts, len(r.attempts))
	}
	if !s.reasonFits(r, reason) {
		s.violate(r, "gave up for a reason that does not fit the request: %v", reason)
	}
	s.figures["give-up: "+reason.String()]++ // (s.mu is held)
}

// checkTold: what RoundTrip returned tells the caller why the Transport
// stopped and the key it sent: a response given up on reads its reason
// (StopReason), any other none; an *Error, and a response's Request, the
// key the first attempt carried (PrepareRetry may change a retry's). A
// Transport beneath says first why it stopped, and the SDK sets keys of its
// own: nested requests are not checked.
func (s *sim) checkTold(r *simReq, reason retryhttp.Reason) {
	if s.cfg.nest != nestNone {
		return
	}
	if r.resp != nil && (s.cfg.hooks || reason != 0) {
		if got := retryhttp.StopReason(r.resp); got != reason {
			s.violate(r, "StopReason says %v, the request gave up with %v", got, reason)
		}
	}
	sent := ""
	if len(r.calls) > 0 {
		sent = wireKey(r.calls[0].header, r.pol.keys)
	}
	var told string
	switch e, ok := r.err.(*retryhttp.Error); {
	case ok:
		told = textproto.TrimString(e.Key)
	case r.resp != nil && r.resp.Request != nil:
		told = wireKey(r.resp.Request.Header, r.pol.keys)
	default:
		return
	}
	if told != sent {
		s.violate(r, "the key told is %q, the first attempt carried %q", told, sent)
	}
}

// checkVerdict: an AdviceHandler whose handler's call gave up on a failing
// dependency marks its 5xx "X-Should-Retry: false", and only then. The
// dependency failed where the call gave up for the budget, the server's
// wait or verdict, or throttling, or after more than one attempt at the
// request, counting those its caller's key had before or its SDK's
// header counts.
func (s *sim) checkVerdict(r *simReq, reason retryhttp.Reason, attempts int) {
	if !s.cfg.verdict || s.cfg.nest != nestNone || r.prior < 0 || (reason == 0 && !s.cfg.hooks) {
		return // a nested Transport's calls give up too; without OnGiveUp, a response's reason is unseen
	}
	earlier := max(r.prior, r.sdkAttempt-1)
	failing := false
	switch reason {
	case retryhttp.ReasonBudget, retryhttp.ReasonRetryAfter, retryhttp.ReasonServer, retryhttp.ReasonThrottled:
		failing = true
	case retryhttp.ReasonExhausted, retryhttp.ReasonDeadline, retryhttp.ReasonNoRetries:
		failing = earlier+attempts > 1
	}
	if got := r.verdict == "false"; got != failing {
		s.violate(r, "inside an AdviceHandler, gave up (%v) after %d attempts, %d before: verdict %q",
			reason, attempts, earlier, r.verdict)
	}
}

// checkErrorWraps: an *Error unwraps to the context's error when the
// context ended the request, and to no attempt's error when throttled unsent.
func (s *sim) checkErrorWraps(r *simReq, e *retryhttp.Error) {
	switch {
	case e.Reason == retryhttp.ReasonDeadline && !errors.Is(e, context.DeadlineExceeded):
		s.violate(r, "a deadline's *Error is not context.DeadlineExceeded: %v", e)
	case e.Reason == retryhttp.ReasonCanceled && !errors.Is(e, context.Canceled):
		s.violate(r, "a cancellation's *Error is not context.Canceled: %v", e)
	case e.Reason == retryhttp.ReasonThrottled && e.Attempts == 0 && e.Err != nil:
		s.violate(r, "a throttled *Error, never sent, has an attempt's error: %v", e)
	case e.Reason != retryhttp.ReasonThrottled && e.Err == nil:
		s.violate(r, "an *Error without the last attempt's error: %v", e)
	}
}

// reasonFits reports whether a request could give up for reason, by what
// it is and what happened to it.
func (s *sim) reasonFits(r *simReq, reason retryhttp.Reason) bool {
	n := len(r.attempts)
	switch reason {
	case retryhttp.ReasonExhausted:
		return n == r.pol.max || (r.callerKey != "" && r.prior != 0)
	case retryhttp.ReasonNoRetries:
		return r.pol.max == 1 || r.sdkAttempt >= 2 || s.cfg.nest != nestNone
	case retryhttp.ReasonUnsafe:
		return !idempotentMethod(r.method) || (r.payload != nil && r.req.GetBody == nil) || r.getBodyFail > 0
	case retryhttp.ReasonDeadline:
		return r.hasDeadline
	case retryhttp.ReasonCanceled:
		return r.cancelAt > 0 && (r.end.Sub(r.start) >= r.cancelAt || r.canceledAtAnswer)
	case retryhttp.ReasonThrottled:
		return r.pol.throttle
	case retryhttp.ReasonBudget:
		return !s.cfg.unlimited
	case retryhttp.ReasonServer:
		for _, c := range r.calls {
			if c.noRetry {
				return true
			}
		}
		return false
	case retryhttp.ReasonRetryAfter:
		if n == 0 && r.pol.hostWait > 0 {
			return true // its turn, after its host's wait, came past HostWait (see checkHeldEnd)
		}
		for _, c := range r.calls {
			if c.hint.valid && c.hint.waitAt(c.start) > r.pol.maxRA {
				return true
			}
		}
		return false
	}
	return reason == retryhttp.ReasonNotTransient
}

// checkRetries: for a request not hedged, each retry waited what the
// server asked (within MaxRetryAfter, plus at most 10 % or 1 s of jitter),
// or the backoff when it asked nothing valid, and went out when OnRetry
// said, a drain of the failed body aside.
func (s *sim) checkRetries(r *simReq) {
	if !s.cfg.hooks || r.panicked != nil || r.pastHorizon {
		return
	}
	for _, e := range r.retries {
		if e.Hedge {
			return
		}
	}
	if n := len(r.attempts); n > 0 && len(r.retries) != n-1 && len(r.retries) != n {
		s.violate(r, "%d OnRetry events for %d attempts", len(r.retries), n)
	}
	s.checkRetryMade(r)
	s.checkPrev(r)
	for _, e := range r.retries {
		s.checkWait(r, e)
		for _, a := range r.attempts {
			if a.n != e.Attempt+1 {
				continue
			}
			// Delay counts from the failure; OnRetry comes after the wait
			// in the budget's line, BudgetWait of it.
			left := e.Delay - e.BudgetWait
			lo, hi := e.at.Add(left), e.at.Add(max(left, respbody.MinTime))
			if a.start.Before(lo) || a.start.After(hi) {
				s.violate(r, "attempt %d went out %v after OnRetry, which said %v after %v in line",
					a.n, a.start.Sub(e.at), e.Delay, e.BudgetWait)
			}
		}
	}
}

// checkRaceWaits: a wait that one answer of a race asks for holds for the
// request, whichever answer came last. The retry after a race waits at
// least the longest wait any of its answers asked for, and none follows an
// answer that asked for more than MaxRetryAfter.
func (s *sim) checkRaceWaits(r *simReq) {
	if !s.cfg.hooks || r.panicked != nil || r.pastHorizon || r.pol.judged || s.cfg.nest != nestNone {
		return
	}
	first := 1 // the race's first attempt
	for i, e := range r.retries {
		if e.Hedge {
			continue
		}
		judged, made := e.at.Add(-e.BudgetWait), e.Delay-e.BudgetWait
		// The attempts this retry follows: those sent since the last retry
		// (a race's hedges included), whichever of them e names. Each
		// OnRetry announces one attempt, after the first: i+1 went before.
		last := i + 1
		for _, c := range r.calls {
			if c.n < first || c.n > last || !c.headerRead() || !c.hint.valid {
				continue
			}
			switch w := c.hint.waitAt(judged); {
			case w > r.pol.maxRA:
				s.violate(r, "retried after attempt %d, whose %s asked %v, past MaxRetryAfter %v",
					c.n, c.hint.name, w, r.pol.maxRA)
			case made < w:
				s.violate(r, "the retry after attempt %d waited %v; attempt %d's %s asked %v",
					e.Attempt, made, c.n, c.hint.name, w)
			}
		}
		first = last + 1
	}
}

// answerOf returns the server's call whose answer retry e follows: the one
// that sent e's Response, else (in a seed that nests no Transport) the
// call of e's attempt whose header the Transport read before dropping the
// answer, as a body that failed to buffer drops it; nil if neither.
func (r *simReq) answerOf(e simRetry) *simCall {
	if c := r.callOf(e.Response); c != nil || e.Response != nil {
		return c
	}
	for _, c := range r.calls {
		if c.n == e.Attempt && c.dup == 0 && c.headerRead() {
			return c
		}
	}
	return nil
}

// headerRead reports whether the Transport read the header of c's answer:
// there was one, without an error beside it.
func (c *simCall) headerRead() bool { return c.resp != nil && c.fault != faultContract }

// checkRetryMade: a retry that OnRetry announced for a time before the
// deadline is not given up on at the deadline (a drain, say, must not hold
// it until then).
func (s *sim) checkRetryMade(r *simReq) {
	n := len(r.attempts)
	if n == 0 || len(r.retries) != n || !r.hasDeadline {
		return
	}
	reason := s.reason(r)
	e := r.retries[n-1]
	if due := e.at.Add(e.Delay - e.BudgetWait); reason == retryhttp.ReasonDeadline && due.Before(r.deadlineAt) {
		s.violate(r, "OnRetry announced attempt %d %v before the deadline, which it gave up at",
			n+1, r.deadlineAt.Sub(due))
	}
}

// checkPrev: a Backoff drawing a retry's wait after n retries is given as
// prev the wait made before the n-th (OnRetry's Delay, the budget's line
// included), 0 before the first. (The calls with the largest sample below
// 1 are the schedule's, which chain the longest waits instead.)
func (s *sim) checkPrev(r *simReq) {
	made := make(map[int]time.Duration) // retries made -> the wait made before the last
	for _, e := range r.retries {
		made[e.Attempt] = e.Delay
	}
	for _, d := range r.draws {
		if d.u == 0x1p0-0x1p-53 {
			continue
		}
		want, ok := made[d.n]
		if d.n == 0 {
			want, ok = 0, true
		}
		if ok && d.prev != want {
			s.violate(r, "Backoff drew the wait after %d retries with prev %v; the wait made before the last was %v",
				d.n, d.prev, want)
		}
	}
}

// checkWait checks the wait of retry e against what its response asked.
func (s *sim) checkWait(r *simReq, e simRetry) {
	c := r.answerOf(e)
	if c == nil || !c.hint.valid {
		if e.Source != "backoff" {
			s.violate(r, "retry after attempt %d waited %v for %v, but nothing valid asked for it", e.Attempt, e.Delay, e.Source)
		}
		return
	}
	jitter := func(d time.Duration) time.Duration { return min(d/10, time.Second) }
	w := c.hint.waitAt(e.at.Add(-e.BudgetWait)) // when the response was judged
	switch {
	case w == 0:
		if e.Source != "backoff" {
			s.violate(r, "%s asked for no wait; the retry waited %v for %v", c.hint.name, e.Delay, e.Source)
		}
		return
	case w > r.pol.maxRA:
		s.violate(r, "retried after %s asked %v, over MaxRetryAfter %v", c.hint.name, w, r.pol.maxRA)
		return
	}
	// A server's wait counts from the retry's release from the budget's line.
	if d := e.Delay - e.BudgetWait; d < w || d-w > jitter(w) || e.Source != c.hint.source {
		s.violate(r, "%s asked %v (MaxRetryAfter %v): the retry waited %v for %v, %v of it in line",
			c.hint.name, w, r.pol.maxRA, e.Delay, e.Source, e.BudgetWait)
	}
}

// checkStats: the Transport's Stats agree with what the simulation sent
// and the server got, and with its hooks; so do a nested Transport's and
// the hosts'.
func (s *sim) checkStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var requests, attempts, started, calls, hedges, letGo int
	giveUps := make(map[retryhttp.Reason]uint64)
	hosts := make(map[string]retryhttp.Stats)
	for _, r := range s.reqs {
		if r.end.IsZero() {
			continue
		}
		requests++
		attempts += len(r.attempts) + len(r.resumeAttempts)
		calls += len(r.calls) + len(r.resumeCalls)
		if len(r.attempts) > 0 {
			started++
		}
		for _, e := range append(r.retries[:len(r.retries):len(r.retries)], r.resumeRetries...) {
			switch {
			case e.Hedge:
				hedges++
			case e.BudgetWait > 0:
				letGo++
			}
		}
		for _, g := range append(r.giveUps[:len(r.giveUps):len(r.giveUps)], r.resumeGiveUps...) {
			giveUps[g.Reason]++
		}
		host := r.req.URL.Host
		h := hosts[host]
		h.Requests++
		h.Attempts += uint64(len(r.attempts) + len(r.resumeAttempts))
		hosts[host] = h
	}
	for _, w := range s.warmed {
		requests += w.n
		attempts += w.attempts
		started += w.n
		calls += w.attempts // each answered at once, through a nested Transport too
		if w.host == "" {
			continue // the crowd, whose hosts are forgotten
		}
		h := hosts[w.host]
		h.Requests += uint64(w.n)
		h.Attempts += uint64(w.attempts)
		hosts[w.host] = h
	}
	st := s.tr.Stats()
	switch {
	case st.Requests != uint64(requests) || st.Attempts != uint64(attempts):
		s.violate(nil, "Stats: %d requests and %d attempts; sent %d and %d", st.Requests, st.Attempts, requests, attempts)
	case st.Retries+st.Hedges != uint64(attempts-started):
		s.violate(nil, "Stats: %d retries and %d hedges; %d attempts of %d requests sent", st.Retries, st.Hedges, attempts, started)
	case st.HedgeWins > st.Hedges:
		s.violate(nil, "Stats: %d hedges, %d won", st.Hedges, st.HedgeWins)
	case s.cfg.hooks && st.Hedges != uint64(hedges):
		s.violate(nil, "Stats: %d hedges, OnRetry saw %d", st.Hedges, hedges)
	case s.cfg.hooks && st.BudgetWaits != uint64(letGo):
		s.violate(nil, "Stats: %d retries let go by the budget's line, OnRetry saw %d", st.BudgetWaits, letGo)
	case s.cfg.hooks && !maps.Equal(st.GiveUps, giveUps):
		s.violate(nil, "Stats: give-ups %v, OnGiveUp saw %v", st.GiveUps, giveUps)
	case st.BudgetRefusals != st.GiveUps[retryhttp.ReasonBudget] || st.Throttled < st.GiveUps[retryhttp.ReasonThrottled]:
		s.violate(nil, "Stats: %d budget denials, %d throttled; give-ups %v", st.BudgetRefusals, st.Throttled, st.GiveUps)
	case s.cfg.nest != nestSDK && st.NetHTTPResends != 0:
		s.violate(nil, "Stats: %d resends, where the base never resends", st.NetHTTPResends)
	}
	if s.inner != nil {
		if in := s.inner.Stats(); in.Requests != uint64(attempts) || in.Attempts != uint64(calls) {
			s.violate(nil, "the nested Transport's Stats: %d requests and %d attempts; "+
				"%d were sent to it, and the server got %d", in.Requests, in.Attempts, attempts, calls)
		}
	}
	if s.cfg.trackHosts >= 4 {
		for host, want := range hosts {
			if got := s.tr.HostStats()[host]; got.Requests != want.Requests || got.Attempts != want.Attempts {
				s.violate(nil, "HostStats[%s]: %d requests and %d attempts; sent %d and %d",
					host, got.Requests, got.Attempts, want.Requests, want.Attempts)
			}
		}
	}
}
