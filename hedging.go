package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hostgate"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// A group is a hedged request's first attempt and its hedges, in flight
// together, each on a goroutine of its own. The request's goroutine judges
// each outcome once as it comes back, as any attempt's (call.judge), and
// sends the hedges. The first outcome not to be retried wins, and the
// others are canceled; when all failed, the loop acts on the failure
// whose answer asks for the longest wait (see end).
type group struct {
	c    call          // a copy of the call for the attempts' goroutines: the call itself stays on the stack
	back chan struct{} // the clock's signal: an outcome came back

	mu       sync.Mutex
	returned []*member // outcomes back, not yet taken by the request's goroutine
	ended    bool      // the request has its result: an outcome back later drops itself

	// The request's goroutine's.
	sent     []*member // every attempt made, the first's first
	out      int       // attempts sent whose outcomes are not taken yet
	won      *member   // the winner
	failed   []*member // the failures back, kept until the group ends (see end)
	more     bool      // more hedges may go
	finished bool      // the loop ended: no hook panicked
}

// A member is an attempt of a group and what it is sent with, in one
// allocation: its context (the caller's, with the attempt's mark, to be
// canceled alone), its request, and the body that ends that context with
// the response's.
type member struct {
	a        attempt
	s        sending
	start    time.Time // when it was sent
	inBase   bool      // sent, and its outcome not taken: its goroutine's
	panicked any       // what the base panicked with, if it did
	ctx      mark.Context
	cancel   context.CancelFunc
	body     respbody.Release
	req      http.Request
}

// sendHedged sends attempt a, the first, and its hedges, the first delay
// after it (see Hedge), and leaves in a the outcome to act on (see end).
func (c *call) sendHedged(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error), delay time.Duration) {
	g := &group{c: *c, back: c.t.clock.Signal()}
	defer g.end(c, a)                        // also should a hook panic
	m, _ := g.prepare(c, a.n, body, getBody) // a first attempt: no PrepareRetry, no error
	g.start(c, m)
	most := min(c.p.hedge.MaxHedges+1, c.max)
	next := m.start.Add(delay) // when the next hedge may go
	g.more = true
	for g.won == nil && g.out > 0 {
		ctx, due := c.parent, next
		if !g.more {
			// The attempts end with the caller's: wait for their outcomes.
			ctx, due = context.Background(), time.Time{}
		}
		woke := c.t.clock.Sleep(ctx, due, g.back)
		g.judgeBack(c)
		switch {
		case g.won != nil || !g.more:
		case woke == clock.WokeContext:
			g.more = false
		case !c.t.clock.Now().Before(next):
			g.more = g.hedge(c, next) && g.more
			next = c.t.clock.Now().Add(c.hedge.Delay(c.p.hedge))
		}
		g.more = g.more && len(g.sent) < most
	}
	g.finished = true
}

// judgeBack judges the outcomes back, in the order they came: the first
// not to be retried wins, and those back with it lose; a failure whose
// answer asks for a wait stops the copies.
func (g *group) judgeBack(c *call) {
	for _, m := range g.take() {
		switch now := c.t.clock.Now(); {
		case m.panicked != nil:
			panic(m.panicked) // the group ends without a result (see end)
		case g.won != nil:
			g.drop(c, m)
		case g.judge(c, m, now):
			g.won = m
		default:
			if askedWait(&m.a, now) > 0 {
				g.more = false // the server asked for a wait: no more copies
			}
			g.failed = append(g.failed, m)
		}
	}
}

// judge judges attempt m, back at now, and reports whether it wins (its
// outcome is not to be retried); the host learns a winner's latency.
func (g *group) judge(c *call, m *member, now time.Time) bool {
	c.hedgedRequest(&m.a)
	m.a.v, m.a.judged = c.judge(&m.a), true
	if m.a.v.retry {
		return false
	}
	if m.a.resp != nil {
		c.hedge.Observe(now.Sub(m.start))
	}
	return true
}

// drop ends attempt m: its context, and its outcome drained and closed (or,
// never sent, its body); one still in the base drops its own when back.
func (g *group) drop(c *call, m *member) {
	m.cancel()
	switch {
	case m.inBase:
	case m.start.IsZero():
		m.s.abandon(&m.a)
	default:
		m.a.drain(c.parent, c.t.clock)
		m.a.resp = nil
	}
}

// prepare makes attempt n's request, with body, under a context of its own
// (see call.prepare), and enters it in the group, not sent yet. On error,
// PrepareRetry's, it is not entered, and nothing of it is left.
func (g *group) prepare(c *call, n int, body io.ReadCloser, getBody func() (io.ReadCloser, error)) (*member, error) {
	m := &member{a: attempt{n: n}}
	ctx, cancel := context.WithCancel(c.parent)
	m.ctx.Context, m.ctx.Mark.N, m.cancel = ctx, n, cancel
	defer func() {
		if m.cancel == nil { // prepare failed, or PrepareRetry panicked
			cancel()
		}
	}()
	m.cancel = nil
	s, err := c.prepare(m, &m.a, body, getBody)
	if err != nil {
		return nil, err
	}
	m.s, m.cancel = s, cancel
	g.sent = append(g.sent, m)
	return m, nil
}

// start sends m on a goroutine the clock starts (so that a simulation's
// clock knows of it), which hands the outcome back to the group, or drops
// it if the group is over. A panic of the base's is handed back too, to
// go on on the request's goroutine, as it would without hedging.
func (g *group) start(c *call, m *member) {
	m.start = c.t.clock.Now()
	c.recordSend(&m.a, m.start, m.a.n > 1)
	m.inBase = true
	g.out++
	c.sent = m.a.n
	c.t.clock.Go(func() {
		defer g.handBack(m)
		defer func() { m.panicked = recover() }()
		g.c.send(&m.a, &m.s)
	})
}

// handBack hands m's outcome back to the group, or, the group over, drops
// it (a panic then goes on where it happened: no one else is left).
func (g *group) handBack(m *member) {
	g.mu.Lock()
	if g.ended {
		g.mu.Unlock()
		if m.panicked != nil {
			panic(m.panicked)
		}
		m.a.drain(g.c.parent, g.c.t.clock)
		m.cancel()
		return
	}
	g.returned = append(g.returned, m)
	g.mu.Unlock()
	g.c.t.clock.Fire(g.back)
}

// hedge sends a hedge due at due if one may go now (before the deadline,
// paid for by the budget, within the host's hedge share), and reports
// whether hedges may still go: not past the deadline, nor once one could
// not be made (its body, or PrepareRetry, failed: the next would fail too).
func (g *group) hedge(c *call, due time.Time) bool {
	now := c.t.clock.Now()
	if c.stop(now, 0) != 0 {
		return false
	}
	if !c.budget.account.Spend(now) {
		return true
	}
	if !c.gates.Admit(hostgate.KindHedge, c.t.monoAt(now), c.t.rand) {
		c.budget.account.Refund()
		return true
	}
	n := c.sent + 1
	var m *member
	body, getBody, err := c.body.Next(c.req, n)
	if err == nil {
		m, err = g.prepare(c, n, body, getBody)
	}
	if err != nil {
		c.budget.account.Refund()
		return false
	}
	if g.judgeBack(c); g.won != nil {
		// An outcome came back while the hedge was made (PrepareRetry
		// takes time), and won: the hedge is not needed.
		g.drop(c, m)
		g.sent = g.sent[:len(g.sent)-1]
		c.budget.account.Refund()
		return false
	}
	m.a.paid = true // given back if it wins
	c.host.count(nHedges)
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: n - 1, Delay: due.Sub(g.sent[0].start), Source: "hedge", Hedge: true})
	}
	c.recordWait(due.Sub(g.sent[0].start), 0, "hedge")
	g.start(c, m)
	return true
}

// take returns the outcomes back since its last call, valid until its next.
func (g *group) take() []*member {
	g.mu.Lock()
	back := g.returned
	g.returned = nil
	g.mu.Unlock()
	for _, m := range back {
		m.inBase = false
	}
	g.out -= len(back)
	return back
}

// end leaves the group's result in a: the winner; else the failure whose
// answer asks, now, for the longest wait (the last back of those asking as
// long), so that any answer's wait holds for the retry. The others are
// dropped; the result's context ends with its body. Should a hook have
// panicked, there is no result: all are dropped.
func (g *group) end(c *call, a *attempt) {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
	g.take()
	res := g.won
	if res == nil && g.finished {
		now, longest := c.t.clock.Now(), time.Duration(-1)
		for _, m := range g.failed {
			if d := askedWait(&m.a, now); d >= longest {
				res, longest = m, d
			}
		}
	}
	if !g.finished {
		res = nil
	} else if res == g.won && res != g.sent[0] {
		c.host.count(nHedgeWins)
	}
	for _, m := range g.sent {
		if m != res {
			g.drop(c, m)
		}
	}
	if res != nil {
		*a = res.a
		res.endWith(a)
		c.held.resp = a.resp // the call's, should a hook panic
	}
}

// askedWait returns the wait that attempt a's answer asks for at now, or 0.
func askedWait(a *attempt, now time.Time) time.Duration {
	if a.answerHeader() == nil {
		return 0
	}
	d, _, ok := serverWait(a, now)
	if !ok {
		return 0
	}
	return max(d, 0)
}

// hedgedRequest gives the response of attempt a of a group, if any, the
// request it is to carry (see responseRequest), on the request's goroutine:
// an attempt that answers after the group is over reads nothing of the
// caller's. The first attempt's is the caller's request, whose Attempts is
// 1, as the mark's (not the attempt's own context, which ends with the
// body; a context holding an earlier request's mark gets this one's).
func (c *call) hedgedRequest(a *attempt) {
	switch {
	case a.resp == nil:
	case a.n == 1 && !c.markedBefore && c.key.added == "":
		a.resp.Request = c.req
	default:
		a.resp.Request = c.answeredRequest(mark.With(c.parent, a.mark))
	}
}

// endWith ends m's context with attempt a's response body (a is m's
// outcome, moved), or now if a has no response.
func (m *member) endWith(a *attempt) {
	if a.resp == nil {
		m.cancel()
		return
	}
	m.body.Body, m.body.Fn = a.resp.Body, m.cancel
	respbody.Wrap(a.resp, &m.body)
}
