package sim

// The draws and the invariant of issue 49, Policy.HostWait: a host that
// asked a request to wait holds the new requests to it. A share of the
// random and default seeds set HostWait, send their requests to one host
// (or a few), apart in time, and get answers asking for waits from it (a
// 429, 503 or rate-limit 403 asking 1 to 3 s, or a 200 saying none are
// left for 1 to 3 s); checkHostWait checks that no first attempt went to
// the host inside a wait the Transport had been told, and that a request
// held ended as HostWait says. All from streams of their own (the seed's
// stream 9, and streams per request and attempt), so that every other draw
// of a seed stays as it was.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
)

// drawHostWait sets HostWait for a quarter of the random seeds and a third
// of the default Transport's that nest no Transport and draw no race of a
// host per request, no crowd, tiny budget or slow failed bodies: 50 ms
// (below the waits the host asks, so that its cap ends requests) or 1 to
// 10 s. Half of them send every request to one host; a fifth to half of
// their attempts are answered as a rate-limited host answers (see
// limitedAnswer); their requests sent one at a time go 0 to 2 s apart.
func (s *sim) drawHostWait() {
	c, hw := &s.cfg, rand.New(rand.NewPCG(s.seed, 9))
	eligible := c.nest == nestNone && !c.crowd && !c.hostPerRequest && !c.flaky && c.warm == 0 && !c.slowFail
	switch {
	case !eligible, c.kind == kindUnlimited:
		return
	case c.kind == kindRandom && hw.IntN(4) != 0, c.kind == kindDefault && hw.IntN(3) != 0:
		return
	}
	c.hostWait = true
	c.policy.HostWait = pick(hw, 50*time.Millisecond, time.Second, 2*time.Second, 5*time.Second,
		10*time.Second, 10*time.Second)
	c.oneHost = c.burst || hw.IntN(2) == 0
	c.limitRate = pick(hw, 0.2, 0.35, 0.5)
	c.desc = append(c.desc, fmt.Sprintf("HostWait %v, one host %v, %v of the attempts answered as a limited host",
		c.policy.HostWait, c.oneHost, c.limitRate))
	s.count("config: HostWait")
}

// hostWaitRequest sends request r of a HostWait seed to a.sim if the seed
// has one host, and, if it sends one request at a time, draws the time it
// goes after the one before (so that it may come inside a wait, or after).
func (s *sim) hostWaitRequest(r *simReq) {
	if !s.cfg.hostWait {
		return
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|9))
	if u, err := url.Parse(r.url); err == nil && s.cfg.oneHost {
		u.Host = "a.sim"
		r.url = u.String()
	}
	if !s.cfg.concurrent && r.id > 1 {
		r.gap = pick(rng, 0, 10*time.Millisecond, 300*time.Millisecond, time.Second, 2*time.Second)
	}
}

// The answers of a rate-limited host (see limitedAnswer).
const (
	limitedNone      = iota
	limited429       // 429, Retry-After: 1 to 3 (seconds)
	limited503       // 503, Retry-After: 1 to 3
	limited403       // 403, Retry-After: 1 to 3, which the default policy retries as a rate limit
	limitedDate      // 429, a Retry-After date 2 or 3 s away
	limitedRateLimit // 200, RateLimit: "q";r=0;t=1 to 3: none left
	limitedReset     // 200, X-RateLimit-Remaining: 0 and X-RateLimit-Reset: 1 to 3
	numLimited
)

var limitedNames = [numLimited]string{"", "429", "503", "403", "429 date", "200 RateLimit r=0",
	"200 X-RateLimit-Remaining 0"}

// limitAttempt draws whether attempt c of request r, in a HostWait seed,
// is answered as a rate-limited host answers, and how: then its fault is
// an answer (a failure status, or a success).
func (s *sim) limitAttempt(r *simReq, c *simCall) {
	if !s.cfg.hostWait || c.n > 30 {
		return
	}
	rng := s.raceRand(r, c, 13)
	if rng.Float64() >= s.cfg.limitRate {
		return
	}
	c.limited = 1 + rng.IntN(numLimited-1)
	c.fault = faultStatus
	if c.limited >= limitedRateLimit {
		c.fault = faultNone
	}
	s.count("answer of a limited host: " + limitedNames[c.limited])
}

// limitedAnswer sets the status and the header of answer c, if it is a
// limited host's (see limitAttempt), and the wait it asks for.
func (s *sim) limitedAnswer(r *simReq, c *simCall, h http.Header) http.Header {
	if c.limited == limitedNone {
		return h
	}
	rng := s.raceRand(r, c, 14)
	h = http.Header{}
	secs := 1 + rng.IntN(3)
	wait := time.Duration(secs) * time.Second
	switch c.limited {
	case limited429, limited503, limited403:
		c.status = map[int]int{limited429: http.StatusTooManyRequests, limited503: http.StatusServiceUnavailable,
			limited403: http.StatusForbidden}[c.limited]
		h.Set("Retry-After", strconv.Itoa(secs))
		c.hint = simHint{name: "Retry-After seconds", valid: true, wait: wait, source: "Retry-After"}
	case limitedDate:
		c.status = http.StatusTooManyRequests
		date := time.Now().Add(time.Duration(2+rng.IntN(2)) * time.Second).UTC().Truncate(time.Second)
		h.Set("Retry-After", date.Format(http.TimeFormat))
		c.hint = simHint{name: "Retry-After date", valid: true, date: date, source: "Retry-After"}
	case limitedRateLimit:
		c.status = http.StatusOK
		h.Set("RateLimit", fmt.Sprintf(`"q";r=0;t=%d`, secs))
		c.hint = simHint{name: "RateLimit", valid: true, wait: wait, source: "RateLimit"}
	case limitedReset:
		c.status = http.StatusOK
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset", strconv.Itoa(secs))
		c.hint = simHint{name: "X-RateLimit-Reset", valid: true, wait: wait, source: "RateLimit"}
	}
	return h
}

// A simTold is a wait a host asked for, which the Transport was told: no
// first attempt of a request to the host, under HostWait, may go strictly
// between from and until.
type simTold struct {
	q     *simReq
	a     *simAttempt
	c     *simCall
	from  time.Time // the latest the Transport may have heard the answer
	until time.Time // the earliest the wait may end
}

// toldOf returns the waits the Transport was told by answers from host to
// requests under HostWait. An answer counts only if the Transport's
// attempt loop saw it, for certain: the answer the request returned (heard
// by the time RoundTrip returned), or one OnRetry named as the outcome a
// retry follows (heard by the time the retry's wait began); a hedge that
// lost, an answer dropped as its body failed or its attempt timed out,
// and a base's answer beside an error do not count. It counts if it asked
// a wait above 0 and was a 429 or 503, a 403 retried (a rate limit), or
// any status whose RateLimit or X-RateLimit-Reset asked it (none left).
// The wait runs from when the Transport heard it: a date's to the date,
// a number of seconds' for that long from then, so at least from the
// answer's arrival at the base.
func (s *sim) toldOf(host string) []simTold {
	var out []simTold
	for _, q := range s.reqs {
		if q.req == nil || q.req.URL.Host != host || q.pol.hostWait <= 0 || q.pastHorizon {
			continue
		}
		for _, a := range q.attempts {
			c := q.callOf(a.resp)
			if !a.done || c == nil || !c.headerRead() || !c.hint.valid {
				continue
			}
			from, retried, ok := q.sawAnswer(a.resp)
			limited := c.status == http.StatusTooManyRequests || c.status == http.StatusServiceUnavailable ||
				(c.status == http.StatusForbidden && retried) || c.hint.source == "RateLimit"
			if !ok || !limited {
				continue
			}
			until := c.hint.date
			if until.IsZero() {
				until = a.end.Add(c.hint.wait)
			}
			if until.After(from) {
				out = append(out, simTold{q: q, a: a, c: c, from: from, until: until})
			}
		}
	}
	return out
}

// sawAnswer reports whether the Transport's attempt loop saw resp, an
// answer to q, for certain (see toldOf), and by when at the latest;
// retried, whether a retry followed it (its verdict was to retry).
func (q *simReq) sawAnswer(resp *http.Response) (by time.Time, retried, ok bool) {
	if resp == q.resp && !q.end.IsZero() {
		by, ok = q.end, true
	}
	for _, e := range q.retries {
		if e.Hedge || e.Response != resp {
			continue
		}
		if at := e.at.Add(-e.BudgetWait); !ok || at.Before(by) {
			by = at
		}
		ok, retried = true, true
	}
	return by, retried, ok
}

// checkHostWait: under HostWait, a request's first attempt does not go to
// its host strictly inside a wait the Transport was told by an answer from
// that host (to another request under HostWait; see toldOf): a request
// admitted before the wait was told went at once, before it; one admitted
// inside it goes when it ends, or after. (Retries are not held; the jitter
// is a retry's.) And a request held ends as HostWait says (checkHeldEnd).
func (s *sim) checkHostWait(r *simReq) {
	if r.pol.hostWait <= 0 || s.cfg.nest != nestNone || r.req == nil || r.pastHorizon {
		return
	}
	told := s.toldOf(r.req.URL.Host)
	first, during := r.attemptN(1), false
	for _, w := range told {
		if w.q == r {
			continue
		}
		during = during || (r.start.After(w.from) && r.start.Before(w.until))
		if first != nil && first.start.After(w.from) && first.start.Before(w.until) {
			s.violate(r, "its first attempt went %v after its start, inside the wait %s asked "+
				"(HostWait %v): request %d's attempt %d, status %d, %s, heard by %v and held until %v "+
				"after this request's start", first.start.Sub(r.start), r.req.URL.Host, r.pol.hostWait,
				w.q.id, w.a.n, w.c.status, w.c.hint.name, w.from.Sub(r.start), w.until.Sub(r.start))
			break
		}
	}
	if first != nil && !first.start.Before(r.start.Add(r.pause+r.pol.hostWait)) && !s.toldDuring(r, first.start) {
		s.violate(r, "its first attempt went %v after its start (its body paused %v), past HostWait %v, "+
			"though no answer from %s came back meanwhile to ask for a new wait", first.start.Sub(r.start), r.pause,
			r.pol.hostWait, r.req.URL.Host)
	}
	switch { // (s.mu is held)
	case during && first != nil:
		s.figures["HostWait: requests that came inside a wait told, then went"]++
	case during:
		s.figures["HostWait: requests that came inside a wait told, sent to no one"]++
	}
	s.checkHeldEnd(r)
}

// checkHeldEnd: a request HostWait ends before its first attempt (its turn
// would come past its deadline, or more than HostWait from then) ends at
// once, sent to no one, for ReasonDeadline or ReasonRetryAfter, saying the
// host asked to wait, and only after an answer from the host asked for a
// wait. None is held until its deadline: a request of a deadline above 0
// and a body that does not pause, which gave up for its deadline before any
// attempt, without saying so, was held until then. (That RoundTrip never
// returns past the deadline is checkTime's.)
func (s *sim) checkHeldEnd(r *simReq) {
	said := r.err != nil && strings.Contains(r.err.Error(), "the host asked to wait")
	reason, n := s.reason(r), len(r.attempts)
	switch {
	case r.panicked != nil:
	case said && (n > 0 || (reason != retryhttp.ReasonDeadline && reason != retryhttp.ReasonRetryAfter)):
		s.violate(r, "gave up (%v) after %d attempts, saying the host asked to wait: %v", reason, n, r.err)
	case n == 0 && reason == retryhttp.ReasonRetryAfter && !said:
		s.violate(r, "gave up for a wait before any attempt, without saying the host asked to wait: %v", r.err)
	case said && !s.askedBefore(r.req.URL.Host, r.end):
		s.violate(r, "gave up %v after its start, saying the host asked to wait, though no answer from %s "+
			"had asked for a wait", r.end.Sub(r.start), r.req.URL.Host)
	case n == 0 && reason == retryhttp.ReasonDeadline && !said && r.hasDeadline && r.deadline > 0 && r.pause == 0:
		s.violate(r, "gave up at its deadline, %v after its start, before any attempt, without saying the host "+
			"asked to wait: it was held until its deadline (HostWait %v): %v", r.end.Sub(r.start),
			r.pol.hostWait, r.err)
	}
}

// toldDuring reports whether the Transport may have been told of a wait by
// an answer from r's host, to another request under HostWait, after r's
// start and before t: an answer that asked a valid wait came back before
// t, to a request that had not ended before r's start (the Transport hears
// an answer before its request ends; at r's start, it may hear it after it
// gave r a turn).
func (s *sim) toldDuring(r *simReq, t time.Time) bool {
	for _, q := range s.reqs {
		if q == r || q.req == nil || q.req.URL.Host != r.req.URL.Host || q.pol.hostWait <= 0 ||
			(!q.end.IsZero() && q.end.Before(r.start)) {
			continue
		}
		for _, a := range q.attempts {
			if c := q.callOf(a.resp); c != nil && a.done && a.end.Before(t) && c.hint.valid {
				return true
			}
		}
	}
	return false
}

// askedBefore reports whether an answer from host, to a request under
// HostWait, had asked for a valid wait by t.
func (s *sim) askedBefore(host string, t time.Time) bool {
	for _, q := range s.reqs {
		if q.req == nil || q.req.URL.Host != host || q.pol.hostWait <= 0 {
			continue
		}
		for _, a := range q.attempts {
			c := q.callOf(a.resp)
			if c != nil && a.done && !a.end.After(t) && c.hint.valid && c.hint.waitAt(a.end) > 0 {
				return true
			}
		}
	}
	return false
}
