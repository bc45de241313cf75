package sim

// The draws added for issue 48, all from PCG streams of their own (the
// seed's stream 8, and streams per attempt), so that every other draw of a
// seed stays as it was: callers who cancel as an answer arrives; more
// races, long ones (a slow second hedge, answers asking dates and seconds)
// and quick ones (hedges answered at once, asking Retry-After: 0), each
// request to a host of its own; bursts whose failed bodies take time to
// read before a wait in the budget's line; and a crowd of hosts requested
// while a request is in flight.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The kinds of configuration drawConfig draws.
const (
	kindRandom = iota
	kindDefault
	kindUnlimited
)

// simCrowd is how many other hosts a crowd requests (past the 1024 hosts a
// Transport keeps before it forgets those with no request in flight).
const simCrowd = 1100

// drawMore draws the seed's share of the draws of issue 48, after its
// configuration.
func (s *sim) drawMore() {
	c, more := &s.cfg, s.more
	if more.IntN(8) == 0 {
		c.cancelAnswers = true // a quarter of its answers come as the caller cancels
		c.desc = append(c.desc, "the caller cancels as a quarter of the answers arrive")
		s.count("config: cancels as answers arrive")
	}
	switch {
	case c.kind == kindRandom && !c.racing && !hedgedAfter1ms(c.policy.Hedge) && c.warm == 0 && !c.flaky &&
		!c.conflicts && s.hedgesAllowed() && more.IntN(2) == 0:
		s.startRace("more", true)
	case c.kind == kindUnlimited && !c.burst && more.IntN(3) == 0:
		s.drawZeroWaits()
	case c.kind == kindDefault && !c.burst && more.IntN(3) == 0:
		s.startRace("long, the default policy", false) // no Retryable: see checkRaceWaits
	case c.kind != kindRandom && c.burst && more.IntN(2) == 0:
		s.drawSlowFailures()
	}
	eligible := (c.unlimited && c.nest == nestNone) || c.nest == nestBase
	if eligible && !c.concurrent && c.panicHook == "" && c.warm == 0 && more.IntN(64) == 0 {
		// Request 1's first attempt waits while simCrowd other hosts are
		// requested (see sendCrowd), every host tracked.
		c.crowd, c.trackHosts = true, 1<<12
		c.desc = append(c.desc, fmt.Sprintf("%d other hosts requested during request 1", simCrowd))
		s.count("config: a crowd of hosts")
	}
}

// hedgedAfter1ms reports whether h is the Hedge drawConfig gives a quarter
// of the random seeds (not racing: the answers as drawn).
func hedgedAfter1ms(h *retryhttp.Hedge) bool {
	return h != nil && h.After == time.Millisecond && h.MaxHedges == 2 && h.Fraction == 1
}

// startRace makes the seed race as drawRace does (a Hedge it replaces,
// if any; room for a retry after three attempts), its answers drawn to
// race longer (raceMore), each request to a host of its own unless in a
// burst, and, if judged, a Retryable for a quarter of the policies that
// have none; what names the draw.
func (s *sim) startRace(what string, judged bool) {
	c := &s.cfg
	c.policy.Hedge = &retryhttp.Hedge{After: time.Millisecond, MaxHedges: 2, Fraction: 1}
	c.policy.MaxAttempts = roomForARetry(c.policy.MaxAttempts)
	for k, p := range c.hosts {
		p.MaxAttempts = roomForARetry(p.MaxAttempts)
		c.hosts[k] = p
	}
	c.racing, c.raceMore, c.hostPerRequest = true, true, !c.burst
	c.faultRate = max(c.faultRate, 0.8) // failures to race, three in four of them answers
	if judged && c.policy.Retryable == nil && s.more.IntN(4) == 0 {
		// A Retryable, to see every outcome of the race.
		c.policy.Retryable = s.retryable(pick(s.more, "keep", "peek", "again", "refuse 502"))
	}
	c.desc = append(c.desc, fmt.Sprintf("every request hedged after 1 ms, its answers racing (%s), Retryable %v",
		what, c.policy.Retryable != nil))
	s.count("config: racing (" + what + ")")
}

// roomForARetry returns max, a MaxAttempts, raised to 4 if set lower: a
// retry may follow a race of three attempts.
func roomForARetry(max int) int {
	if max != 0 && max < 4 {
		return 4
	}
	return max
}

// drawZeroWaits makes an UnlimitedBudget seed race, with a Backoff drawn
// for half of them, each request to a host of its own (its hedges then
// have the host's whole allowance), half its hedges answered at once, and
// three failures in four asking Retry-After: 0, which asks for no wait
// (see moreWaits).
func (s *sim) drawZeroWaits() {
	c := &s.cfg
	if s.more.IntN(2) == 0 {
		c.policy.Backoff = s.drawBackoffFrom(s.more)
	}
	c.zeroWaits = true
	s.startRace("Retry-After: 0, a host per request", true)
}

// drawSlowFailures makes a burst of the default Transport's seed, or
// UnlimitedBudget's, meet in a short schedule (2 or 3 attempts, a constant
// backoff of 5 to 20 ms) under a tiny or the default budget, three faults
// in four failure statuses that ask no wait and whose bodies take 10 to 80
// ms to read (see slowFailure): retries read them, then wait in the host's
// line.
func (s *sim) drawSlowFailures() {
	c, more := &s.cfg, s.more
	wait := time.Duration(pick(more, 5, 10, 20)) * time.Millisecond
	c.policy = retryhttp.Policy{MaxAttempts: pick(more, 2, 3), Backoff: s.recordBackoff(retryhttp.Constant(wait))}
	c.budget, c.sizes, c.unlimited = nil, defaultSizes, false
	if more.IntN(2) == 0 {
		c.budget, c.sizes = retryhttp.NewBudget(0.0014, 1), sizesOf(0.0014, 1)
	}
	c.slowFail = true
	c.faultRate = 0.5 // successes, and failures
	c.desc = append(c.desc, fmt.Sprintf("policy %s, budget %+v, failed bodies slow to read",
		describePolicy(c.policy), c.sizes))
	s.count("config: a burst of slow failed bodies")
}

// raceLatency returns the latency of attempt c of request r, latency as
// drawn: in a zero-wait seed, half the hedges answer at once (before the
// next hedge); in the other races of drawMore, three first attempts in
// four answer 3 to 40 ms after they went (after both hedges went), and
// three second hedges in four 3 to 10 s after they went, when the others'
// answers are in and the dates they asked may have passed (see moreWaits).
func (s *sim) raceLatency(r *simReq, c *simCall, latency time.Duration) time.Duration {
	rng := s.raceRand(r, c, 10)
	switch {
	case !s.cfg.raceMore:
	case s.cfg.zeroWaits:
		if c.n > 1 && rng.IntN(2) == 0 {
			return 0
		}
	case c.n == 1 && rng.IntN(4) != 0:
		return time.Duration(3+rng.IntN(38)) * time.Millisecond
	case c.n == 3 && rng.IntN(4) != 0:
		s.count("a slow second hedge")
		return time.Duration(3+rng.IntN(8)) * time.Second
	}
	return latency
}

// raceStatus returns the status of answer c of request r: in the races
// of drawMore but the zero-wait ones, a failure's is one of those the
// default policy retries, so that no failure ends the race.
func (s *sim) raceStatus(r *simReq, c *simCall) int {
	if !s.cfg.raceMore || s.cfg.zeroWaits || c.fault != faultStatus ||
		slices.Contains(retryhttp.DefaultStatuses(), c.status) {
		return c.status
	}
	return pick(s.raceRand(r, c, 12), 503, 500, 502, 504, 429)
}

// moreWaits sets the wait failed answer c asks for in h, its header, in
// a seed of drawMore: in a slow-failure seed, none; in a zero-wait seed,
// three in four ask Retry-After: 0 (no wait, by the docs). In the other
// races, the first attempt and first hedge each ask a date 2 to 4 s away
// or 1 or 2 s (Retry-After seconds), and two second hedges in three none:
// a race's waits then compare one way as they come, another way when the
// race ends (see raceLatency). Later attempts ask either, or what they drew.
func (s *sim) moreWaits(r *simReq, c *simCall, h http.Header) (http.Header, simHint) {
	rng := s.raceRand(r, c, 5)
	switch {
	case s.cfg.slowFail && c.status >= 400:
		return http.Header{}, simHint{name: "none"}
	case !s.cfg.raceMore || c.fault != faultStatus:
		return h, c.hint
	case s.cfg.zeroWaits:
		if rng.IntN(4) == 0 {
			return h, c.hint
		}
		s.count("hint: Retry-After 0 in a race")
		return http.Header{"Retry-After": {"0"}}, simHint{name: "Retry-After 0", valid: true, source: "Retry-After"}
	}
	var kind int // 0: a date, 1: seconds, 2: as drawn
	switch {
	case c.n <= 2:
		kind = rng.IntN(2)
	case c.n == 3 && rng.IntN(3) != 0:
		return http.Header{}, simHint{name: "none"}
	case c.n == 3:
		kind = 2
	default:
		kind = rng.IntN(3)
	}
	switch kind {
	case 0:
		date := time.Now().Add(time.Duration(2+rng.IntN(3)) * time.Second).UTC().Truncate(time.Second)
		s.count("hint: a date in a race")
		return http.Header{"Retry-After": {date.Format(http.TimeFormat)}},
			simHint{name: "Retry-After date", valid: true, date: date, source: "Retry-After"}
	case 1:
		wait := 1 + rng.IntN(2)
		s.count("hint: seconds in a race")
		return http.Header{"Retry-After": {fmt.Sprint(wait)}},
			simHint{name: "Retry-After seconds", valid: true, wait: time.Duration(wait) * time.Second, source: "Retry-After"}
	}
	return h, c.hint
}

// slowFailure makes failed answer c of a slow-failure seed ask no wait,
// and stall 10 to 80 ms before its first byte, then end whole.
func (s *sim) slowFailure(r *simReq, c *simCall, b *simRespBody) {
	if !s.cfg.slowFail || c.status < 400 {
		return
	}
	b.stallAt, b.stall = 0, time.Duration(10+s.raceRand(r, c, 7).IntN(71))*time.Millisecond
	b.cutAt, b.cutAfterStall, b.deaf = -1, false, false
	s.count("response body slow to read, failed")
}

// cancelAtAnswer cancels request r's context just before its server
// returns answer resp to attempt c, sent as req (a quarter of the answers,
// in a seed that draws it), as a caller's deadline or cancellation may
// fall as an answer arrives.
func (s *sim) cancelAtAnswer(req *http.Request, r *simReq, c *simCall, resp *http.Response, err error) {
	if !s.cfg.cancelAnswers || resp == nil || err != nil || req.Context().Err() != nil ||
		s.raceRand(r, c, 6).IntN(4) != 0 {
		return
	}
	s.mu.Lock()
	r.cancelAt, r.canceledAtAnswer, r.canceledAt = max(time.Since(r.start), time.Nanosecond), true, time.Now()
	s.mu.Unlock()
	s.count("caller cancels as an answer arrives")
	r.cancel()
}

// sendCrowd sends simCrowd HEADs to as many other hosts, each answered at
// once, while request 1's first attempt is at the server (a Transport
// keeps 1024 hosts, then forgets those with no request in flight), and
// records them in s.warmed.
func (s *sim) sendCrowd() {
	w := &simReq{id: -2, warm: true, dups: make(map[int]int)}
	ctx := context.WithValue(context.Background(), simReqKey{}, w)
	for i := range simCrowd {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, fmt.Sprintf("http://h%d.crowd.sim/", i), nil)
		if err != nil {
			s.failf(nil, "crowd request: %v", err)
			return
		}
		resp, err := s.tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			s.failf(nil, "crowd request %d failed: %v", i, err)
			return
		}
		resp.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(w.giveUps) > 0 || len(w.attempts) != simCrowd {
		s.violate(nil, "crowd: %d attempts of %d requests, %d given up", len(w.attempts), simCrowd, len(w.giveUps))
	}
	s.crowded = true
	s.warmed = append(s.warmed, simWarm{n: simCrowd, attempts: len(w.attempts), at: time.Now()})
}

// freshHost returns raw, a request's URL, sent to a host of request id's
// own in a seed that sends each request to its own host.
func (s *sim) freshHost(raw string, id int) string {
	if !s.cfg.hostPerRequest {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Host = fmt.Sprintf("r%d.race.sim", id)
	return u.String()
}
