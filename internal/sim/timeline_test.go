package sim

// The draw and the invariant of the request timeline (Policy.Timeline):
// half the seeds turn it on, for every request or for some alone, and
// checkTimeline checks that what retryhttp.Timeline returns is what went
// on the wire: the attempts, when each went, which were hedges, the key
// each carried, the answers, and the waits OnRetry was told of. From
// streams of their own (the seed's stream 10, and one per request), so
// that every other draw of a seed stays as it was.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
)

// drawTimeline turns Policy.Timeline on for half the seeds: in two of
// three, in the Transport's policy, for every request; in the others, for
// half the requests alone, through WithPolicy (see timelineRequest).
func (s *sim) drawTimeline() {
	c, rng := &s.cfg, rand.New(rand.NewPCG(s.seed, 10))
	switch {
	case rng.IntN(2) != 0:
		return
	case rng.IntN(3) != 0:
		c.policy.Timeline = true
		c.desc = append(c.desc, "Timeline on")
		s.count("config: Timeline on")
	default:
		c.timelineEach = true
		c.desc = append(c.desc, "Timeline on for half the requests, through WithPolicy")
		s.count("config: Timeline on for some requests")
	}
}

// timelineRequest gives request r, in a seed that turns the timeline on for
// some requests alone, a WithPolicy layer that turns it on (half of them):
// over its other layers, or under them, where a layer that leaves it off
// cannot undo it.
func (s *sim) timelineRequest(r *simReq) {
	rng := rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|10))
	if !s.cfg.timelineEach || rng.IntN(2) != 0 {
		return
	}
	on := simOverride{p: retryhttp.Policy{Timeline: true}}
	if rng.IntN(2) == 0 {
		r.overrides = append(r.overrides, on)
	} else {
		r.overrides = append([]simOverride{on}, r.overrides...)
	}
	s.count("request with a timeline of its own")
}

// checkTimeline: the timeline of a request whose policy records one (see
// retryhttp.Timeline, read as RoundTrip returned) is what went on the wire:
// an entry for each attempt the Transport's base got, no more, numbered 1
// to n in the order they went, each sent when the base got it, a hedge
// exactly when sent while an earlier attempt was out, with the key the base
// saw and the answer it returned; its outcome came back as the base
// returned it (or, with BufferResponse, once its body was read after), by
// the time RoundTrip returned, unless it was canceled (checkEntry). The
// wait before each, and what set it, are what OnRetry was told
// (checkTimelineHooks), and the time between an attempt and the one before
// holds that wait (checkTimelineWaits). Without the policy, Timeline
// returns nil.
func (s *sim) checkTimeline(r *simReq) {
	if r.panicked != nil {
		return
	}
	tl := r.timeline
	if !r.pol.timeline {
		if tl != nil {
			s.violate(r, "Policy.Timeline is off, yet Timeline returned %d attempts", len(tl))
		}
		return
	}
	s.figures["requests with a timeline"]++ // (s.mu is held)
	if len(tl) != len(r.attempts) {
		s.violate(r, "the timeline has %d attempts; the base got %d", len(tl), len(r.attempts))
		return
	}
	if now := retryhttp.Timeline(r.resp, r.err); len(now) != len(tl)+len(r.resumeAttempts) {
		s.violate(r, "the timeline had %d attempts as RoundTrip returned, %d once the request settled "+
			"(%d resumes)", len(tl), len(now), len(r.resumeAttempts))
	}
	for i, e := range tl {
		if !s.checkEntry(r, i) {
			return
		}
		s.figures[fmt.Sprintf("timeline: attempts after a wait for %q", e.Source)]++
		if canceledEntry(e) {
			s.figures["timeline: attempts canceled"]++
		}
		if e.BudgetWait > 0 {
			s.figures["timeline: attempts after a wait in the budget's line"]++
		}
	}
	s.checkTimelineWaits(r)
	s.checkTimelineHooks(r)
	s.checkCanceled(r)
}

// checkEntry checks entry i of r's timeline against the attempt of its
// number the base got; false if it found a fault.
func (s *sim) checkEntry(r *simReq, i int) bool {
	e := r.timeline[i]
	a := r.attemptN(e.Number)
	fail := func(format string, args ...any) bool {
		s.violate(r, "timeline entry %d (attempt %d): "+format, append([]any{i + 1, e.Number}, args...)...)
		return false
	}
	switch {
	case e.Number != i+1:
		return fail("numbered %d", e.Number)
	case a == nil:
		return fail("the base got no attempt %d", e.Number)
	case i > 0 && e.Start.Before(r.timeline[i-1].Start):
		return fail("sent %v before the attempt before it", r.timeline[i-1].Start.Sub(e.Start))
	case !e.Start.Equal(a.start):
		return fail("sent at %v after the request's start; the base got it at %v", e.Start.Sub(r.start),
			a.start.Sub(r.start))
	case e.Key != a.key:
		return fail("key %q; the base saw %q", e.Key, a.key)
	case e.Request != r.req:
		return fail("its Request is not the caller's")
	case e.Duration < 0 || e.Start.Add(e.Duration).After(r.end):
		return fail("its outcome came back %v after the request's start, which returned %v after it",
			e.Start.Add(e.Duration).Sub(r.start), r.end.Sub(r.start))
	case e.Response == nil && e.Err == nil:
		return fail("neither a response nor an error")
	case e.Response != nil && (e.Response != a.resp || a.err != nil):
		return fail("a response (status %d) the base did not return for it (error %v)", e.Response.StatusCode, a.err)
	case !canceledEntry(e) && !a.done:
		return fail("an outcome, though the base never returned it")
	case !canceledEntry(e) && (e.Start.Add(e.Duration).Before(a.end) ||
		!r.pol.buffered && !e.Start.Add(e.Duration).Equal(a.end)):
		return fail("its outcome came back %v after the request's start; the base returned it %v after "+
			"(BufferResponse %v)", e.Start.Add(e.Duration).Sub(r.start), a.end.Sub(r.start), r.pol.buffered)
	}
	if c := r.callOf(e.Response); c != nil && c.status != e.Response.StatusCode {
		return fail("status %d; the server answered %d", e.Response.StatusCode, c.status)
	}
	return s.checkHedge(r, i)
}

// checkHedge: entry i of r's timeline is a hedge exactly when its attempt
// went while an earlier one was out, as the base saw them. A retry goes
// once every attempt before it is back (in a race, once all are in); a
// hedge, while one is out, or came back at that very instant. That one
// was out is exact only where an outcome reaches the request's goroutine
// as its base returns it: not where the body is buffered first
// (BufferResponse), nor where a Retryable's Peek holds that goroutine.
func (s *sim) checkHedge(r *simReq, i int) bool {
	e := r.timeline[i]
	out, back := false, true // an earlier attempt was out at e.Start; all were back
	for _, b := range r.attempts {
		if b.n >= e.Number {
			continue
		}
		out = out || !b.done || !b.end.Before(e.Start)
		back = back && b.done && !b.end.After(e.Start)
	}
	hedge := e.Source == "hedge"
	switch {
	case e.Hedge != hedge:
		s.violate(r, "timeline entry %d: hedge %v, though its wait's source is %q", i+1, e.Hedge, e.Source)
	case i == 0 && e.Hedge:
		s.violate(r, "timeline entry 1 is a hedge")
	case !e.Hedge && !back:
		s.violate(r, "timeline entry %d is no hedge, yet an earlier attempt was out as it went", i+1)
	case e.Hedge && !out && !r.pol.buffered && r.judging == 0:
		s.violate(r, "timeline entry %d is a hedge, yet every earlier attempt was back before it went", i+1)
	default:
		return true
	}
	return false
}

// checkTimelineWaits: the wait before each attempt, and what set it, fit
// when it went. The first attempt waits for nothing, or for its host
// (HostWait), and goes that long after RoundTrip began, once its body is
// buffered: exactly, with a body that does not pause. A hedge waits for
// its delay, from the first attempt's start, and goes that long after it:
// exactly, unless a Retryable's Peek held the request's goroutine when it
// was due. A retry waits for its backoff or the server, BudgetWait of it in
// the budget's line (which holds backoffs alone), from its failure, which
// came back after every attempt before it: it goes that long after the
// last of them at least, and exactly when its failure was an error that
// reached the request's goroutine at once (no body buffered, drained or
// peeked at, no race's losers drained).
func (s *sim) checkTimelineWaits(r *simReq) {
	if r.pastHorizon {
		return // timers fire at once near the end of time
	}
	tl, raced := r.timeline, false
	for i, e := range tl {
		var from time.Time // when its wait began, at the latest
		exact := false
		switch {
		case i == 0:
			from, exact = r.start, r.pause == 0
		case e.Hedge:
			from, exact = tl[0].Start, r.judging == 0
		default:
			for _, a := range r.attempts {
				if a.n < e.Number && a.end.After(from) {
					from = a.end
				}
			}
			exact = !raced && !r.pol.buffered && r.judging == 0 && tl[i-1].Response == nil
		}
		raced = raced || e.Hedge
		if why := waitFault(r, i); why != "" {
			s.violate(r, "timeline entry %d waited %v for %q, %v of it in the budget's line: %s", i+1, e.Wait,
				e.Source, e.BudgetWait, why)
			return
		}
		if went := e.Start.Sub(from); went < e.Wait || (exact && went != e.Wait) {
			s.violate(r, "timeline entry %d waited %v for %q, yet went %v after its wait began (exact %v)",
				i+1, e.Wait, e.Source, went, exact)
			return
		}
	}
}

// waitFault says what is wrong with the wait of entry i of r's timeline
// and its source, or "".
func waitFault(r *simReq, i int) string {
	e := r.timeline[i]
	switch {
	case e.Wait < 0 || e.BudgetWait < 0 || e.BudgetWait > e.Wait:
		return "out of range"
	case e.BudgetWait > 0 && e.Source != "backoff":
		return "a wait in line, where the line holds backoffs alone"
	case i == 0 && e.Source == "" && e.Wait != 0:
		return "a first attempt's wait, set by nothing"
	case i == 0 && e.Source == "HostWait" && (e.Wait <= 0 || r.pol.hostWait <= 0):
		return fmt.Sprintf("a host's hold, under HostWait %v", r.pol.hostWait)
	case i == 0 && e.Source != "" && e.Source != "HostWait":
		return "a first attempt's wait, set by what sets a retry's"
	case i > 0 && e.Source != "backoff" && e.Source != "Retry-After" && e.Source != "RateLimit" && e.Source != "hedge":
		return "an attempt after the first waits for a backoff, the server or a hedge's delay"
	}
	return ""
}

// checkTimelineHooks: in a seed whose hooks record, the wait before each
// attempt after the first is what OnRetry was told of it, in the same
// order: a hedge's, its delay, after the attempt before it; a retry's,
// its Delay, Source and BudgetWait, after an attempt whose entry has the
// Response OnRetry was told of and the verdict to retry. Only a retry
// announced last may not have gone (its wait or PrepareRetry ended the
// request).
func (s *sim) checkTimelineHooks(r *simReq) {
	if !s.cfg.hooks {
		return
	}
	tl, next := r.timeline, 0
	for i, e := range tl {
		if i == 0 {
			continue
		}
		if next == len(r.retries) {
			s.violate(r, "timeline entry %d waited %v for %q, of which OnRetry was not told", i+1, e.Wait, e.Source)
			return
		}
		ev := r.retries[next]
		next++
		if ev.Hedge != e.Hedge || ev.Delay != e.Wait || ev.Source != e.Source || ev.BudgetWait != e.BudgetWait ||
			(ev.Hedge && ev.Attempt != e.Number-1) || (!ev.Hedge && ev.Attempt >= e.Number) {
			s.violate(r, "timeline entry %d: hedge %v after %v for %q, %v in line; OnRetry said hedge %v after "+
				"attempt %d, %v for %q, %v in line", i+1, e.Hedge, e.Wait, e.Source, e.BudgetWait, ev.Hedge,
				ev.Attempt, ev.Delay, ev.Source, ev.BudgetWait)
			return
		}
	}
	if left := r.retries[next:]; len(left) > 1 || (len(left) == 1 && left[0].Hedge) {
		s.violate(r, "OnRetry was told of %d attempts the timeline does not have", len(left))
		return
	}
	for _, ev := range r.retries {
		if ev.Hedge || ev.Attempt < 1 || ev.Attempt > len(tl) {
			continue
		}
		if f := tl[ev.Attempt-1]; !f.Retry || f.Response != ev.Response {
			s.violate(r, "OnRetry was told of a retry after attempt %d, whose timeline entry says retry %v, "+
				"response %v (OnRetry: %v)", ev.Attempt, f.Retry, f.Response != nil, ev.Response != nil)
			return
		}
	}
}

// canceledEntry reports whether timeline entry e is of an attempt the
// Transport canceled before it came back (its outcome never taken).
func canceledEntry(e retryhttp.Attempt) bool {
	return e.Err != nil && strings.HasPrefix(e.Err.Error(), "retryhttp: attempt canceled")
}

// checkCanceled: an attempt whose outcome the Transport did not take is
// entered canceled only when another of its race won: the first attempt or
// a hedge before any retry, whose outcome, which came back with the verdict
// not to retry, came back before it, or at that very instant (exact where
// no body is buffered before it comes back; every other outcome of a race
// is taken, the caller's context ended or not). It ends no earlier than
// the winner's.
func (s *sim) checkCanceled(r *simReq) {
	tl := r.timeline
	race := min(1, len(tl)) // the entries of the first attempt's race
	for race < len(tl) && tl[race].Hedge {
		race++
	}
	var won *retryhttp.Attempt
	for i := range tl[:race] {
		if e := &tl[i]; !e.Retry && !canceledEntry(*e) {
			won = e
		}
	}
	for i, e := range tl {
		if !canceledEntry(e) {
			continue
		}
		if i >= race || won == nil {
			s.violate(r, "timeline entry %d is canceled, though no other attempt of its race won", i+1)
			return
		}
		end, a, w := e.Start.Add(e.Duration), r.attemptN(e.Number), r.attemptN(won.Number)
		switch {
		case end.Before(won.Start.Add(won.Duration)):
			s.violate(r, "timeline entry %d is canceled %v after the request's start, before attempt %d won",
				i+1, end.Sub(r.start), won.Number)
		case !r.pol.buffered && a.done && a.end.Before(w.end):
			s.violate(r, "timeline entry %d is canceled, though it came back %v after the request's start, "+
				"before attempt %d won, %v after", i+1, a.end.Sub(r.start), won.Number, w.end.Sub(r.start))
		default:
			continue
		}
		return
	}
}
