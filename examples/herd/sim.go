package main

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retryhttp/retryhttp"
)

// slot is the dependency's accounting period: it serves at most Capacity
// requests per slot and fails the rest with 503.
const slot = 10 * time.Millisecond

// origin is where the virtual clock starts. Only differences matter; a fixed
// instant keeps every run identical.
var origin = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// A scenario describes the crowd and the dependency.
type scenario struct {
	Clients     int           // clients, each sending one logical request
	Spread      time.Duration // first attempts are uniform in [0, Spread)
	Outage      time.Duration // the dependency fails everything in [0, Outage)
	Capacity    int           // requests served per slot once it is back
	MaxAttempts int           // attempts per client, the first included
	Transports  int           // Transports (budgets) the clients are dealt over
	Seed        uint64
}

// A budgetKind is what stands between a failed attempt and its retry.
type budgetKind uint8

const (
	noBudget budgetKind = iota // every retry goes after its backoff
	failFast                   // a retry the credit cannot pay for is not made: the request fails at once
	inLine                     // retryhttp's Budget: such a retry waits in line for news of the dependency
)

func (k budgetKind) String() string {
	switch k {
	case failFast:
		return "fail-fast budget"
	case inLine:
		return "retryhttp budget"
	}
	return "no budget"
}

// A strategy is a way of retrying: one of retryhttp's backoffs, with or
// without a budget.
type strategy struct {
	Name        string // BackoffName, and the budget if any
	BackoffName string
	Backoff     retryhttp.Backoff
	Budget      budgetKind
}

// newStrategy returns the strategy of backoff b, named name, with budget k.
func newStrategy(name string, b retryhttp.Backoff, k budgetKind) strategy {
	s := strategy{Name: name, Backoff: b, Budget: k, BackoffName: name}
	if k != noBudget {
		s.Name += " + " + k.String()
	}
	return s
}

// strategies returns the strategies compared, in display order: each
// backoff without a budget, with a budget that fails fast, and with
// retryhttp's budget.
func strategies(base, cap time.Duration) []strategy {
	backoffs := []struct {
		name string
		b    retryhttp.Backoff
	}{
		{"no jitter", retryhttp.Exponential{Base: base, Cap: cap}},
		{"full jitter", retryhttp.FullJitter{Base: base, Cap: cap}},
		{"equal jitter", retryhttp.EqualJitter{Base: base, Cap: cap}},
		{"decorrelated", retryhttp.DecorrelatedJitter{Base: base, Cap: cap}},
	}
	var out []strategy
	for _, b := range backoffs {
		for _, k := range []budgetKind{noBudget, failFast, inLine} {
			out = append(out, newStrategy(b.name, b.b, k))
		}
	}
	return out
}

// A result is what one strategy did to the dependency.
type result struct {
	Strategy strategy

	// Served and Failed count arrivals at the dependency per slot: slot i
	// covers [i*slot, (i+1)*slot). Failed includes the outage's failures.
	Served, Failed []int

	// GaveUp counts the clients that ended without success, per slot;
	// InLine is the most retries waiting in the budgets' lines at once
	// during each slot.
	GaveUp, InLine []int

	Attempts     int           // attempts sent, first ones included
	Succeeded    int           // clients that got a response
	Exhausted    int           // clients that used MaxAttempts and failed
	BudgetDenied int           // clients whose retry the budget did not let go
	BudgetWaits  int           // retries that waited in the budget's line
	LastSuccess  time.Duration // when the last successful client succeeded
	LastEnd      time.Duration // when the last client succeeded or gave up

	// Clients holds each client's run, in client order.
	Clients []clientRun

	// Ties counts the instants at which two timers of the Transports (an
	// attempt's, a budget's, the end of a wait in line) fire together: only
	// there can the order of events, which the simulation takes from the
	// order they were scheduled in, differ from real Transports'.
	Ties int
}

// A clientRun is one client's logical request: when each of its attempts
// reached the dependency, and how it ended.
type clientRun struct {
	Arrivals []time.Duration
	End      outcome
}

// An outcome is how a client's logical request ended.
type outcome uint8

const (
	pending      outcome = iota // not ended yet
	served                      // an attempt was served
	exhausted                   // MaxAttempts attempts failed
	budgetDenied                // the budget did not let a retry go
)

// Peak returns the most arrivals in one slot that starts at or after from.
func (r *result) Peak(from time.Duration) int {
	peak := 0
	for i := int((from + slot - 1) / slot); i < len(r.Served); i++ {
		peak = max(peak, r.Served[i]+r.Failed[i])
	}
	return peak
}

// WhileDown returns the arrivals during an outage of the given length.
func (r *result) WhileDown(outage time.Duration) int {
	n := 0
	for i := 0; i < len(r.Served) && time.Duration(i)*slot < outage; i++ {
		n += r.Served[i] + r.Failed[i]
	}
	return n
}

// Unfinished returns how many clients never succeeded.
func (r *result) Unfinished() int { return r.Exhausted + r.BudgetDenied }

// PerClient returns the attempts per client.
func (r *result) PerClient() float64 { return float64(r.Attempts) / float64(len(r.Clients)) }

// The kinds of event on the queue.
type eventKind uint8

const (
	send    eventKind = iota // a client's attempt reaches the dependency
	tick                     // a budget's timer fires: Advance
	timeout                  // a client's wait in line ends
)

// An event is a pending step on the queue: one timer of a Transport.
type event struct {
	at   time.Duration // virtual time since origin
	seq  int           // tie-break: equal times run in scheduling order
	kind eventKind
	who  int // the client (send, timeout) or the budget (tick)
	gen  int // tick, timeout: which setting of the timer
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// client is one client's progress through its logical request.
type client struct {
	attempts int           // attempts made so far
	prev     time.Duration // the wait before the latest retry
	budget   *budget

	// While a retry waits in the budget's line: its ticket, the backoff it
	// still waits once let go, and when its wait in line ends. horizon is
	// fixed at the request's first wait in line.
	ticket  *retryhttp.BudgetTicket
	delay   time.Duration
	until   time.Duration
	horizon time.Duration
	waited  bool // horizon is set
	gen     int  // waits in line: timeout events of earlier ones are void
}

// budget is a retryhttp.Budget with the timer a Transport drives it with:
// the Transport calls Advance when the timer fires, at the time the last
// call returned, and sets the timer earlier when a retry joins the line or a
// success is reported while retries wait (Budget.armLocked and tick).
type budget struct {
	id    int // its index in sim.bs
	b     *retryhttp.Budget
	due   time.Duration // when the timer fires, if armed
	armed bool
	gen   int   // settings of the timer: its events older than the last are void
	line  int   // retries in line: the Budget's own count
	let   []int // the clients the running Advance lets go
}

// sim is one run of simulate.
type sim struct {
	sc    scenario
	s     strategy
	rng   *rand.Rand
	r     *result
	q     queue
	seq   int
	cl    []client
	bs    []*budget
	now   time.Duration
	last  time.Duration // the last instant with a live event
	first bool          // no live event yet

	inLine   int // retries waiting in the budgets' lines
	lineSlot int // the slot of the line's last change
}

// simulate runs the scenario under strategy s: a discrete-event loop over a
// virtual clock whose events are the timers of the Transports: each
// client's next attempt, each budget's timer, each wait in line that would
// end. An attempt is served or failed by the dependency, and then the
// client does what a retryhttp.Transport does in its attempt loop
// (call.run): report the outcome to the budget (Success or Failure), give
// up after MaxAttempts, take the wait from s.Backoff.Delay(retries made,
// previous wait, a uniform sample), and ask Budget.Retry(now). If the
// credit pays, the next attempt goes after the wait. If not, the retry
// waits in the budget's line (Enqueue) until the budget lets it go (then
// waits its backoff from there) or until its horizon, when it gives up;
// with a fail-fast budget the request fails at once. The same seed gives
// the same result.
func simulate(sc scenario, s strategy) *result {
	m := &sim{sc: sc, s: s, rng: newRand(sc.Seed), first: true,
		r:  &result{Strategy: s, Clients: make([]clientRun, sc.Clients)},
		cl: make([]client, sc.Clients)}
	starts := startTimes(sc, m.rng)

	transports := max(sc.Transports, 1)
	m.bs = make([]*budget, transports)
	for i := range m.bs {
		m.bs[i] = &budget{id: i} // a nil *Budget allows every retry
		if s.Budget != noBudget {
			m.bs[i].b = retryhttp.NewBudget(retryhttp.DefaultBudgetRatio, retryhttp.DefaultBudgetCredit)
		}
	}
	m.q = make(queue, 0, sc.Clients)
	for i := range m.cl {
		m.cl[i].budget = m.bs[i%transports]
		m.push(starts[i], send, i, 0)
	}
	var batch []event
	for m.q.Len() > 0 {
		// The events of one instant, in the order they were scheduled.
		m.now = m.q[0].at
		batch = batch[:0]
		for m.q.Len() > 0 && m.q[0].at == m.now {
			batch = append(batch, heap.Pop(&m.q).(event))
		}
		live := 0
		for _, e := range batch {
			if m.live(e) {
				live++
			}
		}
		// A Transport would run the goroutines of two timers of one instant
		// in any order: two events that are due as the instant begins, or
		// one that an event of the instant scheduled for the instant itself.
		if live > 1 || (live > 0 && !m.first && m.now == m.last) {
			m.r.Ties++
		}
		if live > 0 {
			m.first, m.last = false, m.now
		}
		for _, e := range batch {
			if !m.live(e) {
				continue // a timer stopped, or set again for another time
			}
			switch e.kind {
			case send:
				m.attempt(e.who)
			case tick:
				b := m.bs[e.who]
				b.armed = false
				m.advance(b) // the timer: Budget.tick
			case timeout:
				m.giveUpWaiting(e.who)
			}
		}
	}
	return m.r
}

// live reports whether event e is still due: whether the Transport's timer
// it stands for would fire.
func (m *sim) live(e event) bool {
	switch e.kind {
	case tick:
		b := m.bs[e.who]
		return b.armed && b.gen == e.gen
	case timeout:
		c := &m.cl[e.who]
		return c.ticket != nil && c.gen == e.gen
	}
	return true
}

// push schedules an event.
func (m *sim) push(at time.Duration, kind eventKind, who, gen int) {
	heap.Push(&m.q, event{at: at, seq: m.seq, kind: kind, who: who, gen: gen})
	m.seq++
}

// at returns the virtual instant now as a time.Time.
func (m *sim) at() time.Time { return origin.Add(m.now) }

// attempt lets the dependency take client i's next attempt, now, and
// follows the Transport's attempt loop to the client's next step.
func (m *sim) attempt(i int) {
	c := &m.cl[i]
	r := m.r
	c.attempts++
	r.Attempts++
	run := &r.Clients[i]
	run.Arrivals = append(run.Arrivals, m.now)

	k := m.slot()
	b := c.budget
	if m.now >= m.sc.Outage && r.Served[k] < m.sc.Capacity {
		r.Served[k]++
		r.Succeeded++
		run.End = served
		r.LastSuccess = max(r.LastSuccess, m.now)
		r.LastEnd = max(r.LastEnd, m.now)
		b.b.Success(m.at(), c.attempts)
		if b.line > 0 {
			m.arm(b)
		}
		return
	}
	r.Failed[k]++
	b.b.Failure(m.at())

	if c.attempts >= m.sc.MaxAttempts {
		m.end(i, exhausted)
		return
	}
	delay := max(m.s.Backoff.Delay(c.attempts-1, c.prev, m.rng.Float64()), 0)
	if b.b.Retry(m.at()) {
		c.prev = delay
		m.push(m.now+delay, send, i, 0)
		return
	}
	if m.s.Budget == failFast {
		m.end(i, budgetDenied)
		return
	}
	// awaitBudget: wait in line until let go, or until the horizon (at least
	// this retry's own wait) passes.
	r.BudgetWaits++
	if !c.waited {
		c.horizon = m.now + schedule(m.s.Backoff, c.attempts, m.sc.MaxAttempts, c.prev)
		c.waited = true
	}
	c.delay, c.until = delay, max(c.horizon, m.now+delay)
	c.ticket = b.b.Enqueue(m.at(), func() { b.let = append(b.let, i) })
	b.line++
	m.lineChanged(1)
	c.gen++
	m.push(c.until, timeout, i, c.gen)
	m.arm(b)
}

// arm is Budget.armLocked after a retry joins the line or a success is
// reported while retries wait: the Transport's timer is set to the
// budget's next due time if that is sooner. Advance at now releases what is
// due now, as the timer would at once, and returns the next due time;
// when nothing was due it changes nothing.
//
// Whether anything was due shows in what Advance let go: a recovery that
// starts, or one that goes on after a pause of the line, releases at once;
// the only other thing that can be due is the end of a recovery, after
// which the timer's next firing is no sooner than the Transport's and
// changes nothing (the line waits for a probe, which is not yet due).
func (m *sim) arm(b *budget) {
	next, let := m.advanceAt(b)
	if let == 0 && (next < 0 || (b.armed && b.due <= next)) {
		return // nothing was due, and the timer fires sooner anyway
	}
	m.setTimer(b, next)
}

// advance is the budget's timer firing: Advance, then the timer is set to
// the next due time.
func (m *sim) advance(b *budget) {
	next, _ := m.advanceAt(b)
	m.setTimer(b, next)
}

// advanceAt calls Advance now and lets go the retries it releases: each
// waits its own backoff from now. It returns the next due time (-1: none)
// and how many retries it let go.
func (m *sim) advanceAt(b *budget) (next time.Duration, let int) {
	b.let = b.let[:0]
	t := b.b.Advance(m.at())
	for _, i := range b.let {
		c := &m.cl[i]
		c.ticket = nil
		b.line--
		m.lineChanged(-1)
		c.prev = c.delay
		m.push(m.now+c.delay, send, i, 0)
	}
	if t.IsZero() {
		return -1, len(b.let)
	}
	return t.Sub(origin), len(b.let)
}

// setTimer arms b's timer for next (-1: none).
func (m *sim) setTimer(b *budget, next time.Duration) {
	if next < 0 {
		b.armed = false
		return
	}
	b.armed, b.due = true, next
	b.gen++
	m.push(next, tick, b.id, b.gen)
}

// giveUpWaiting ends client i's wait in line at its horizon: the budget
// did not let its retry go in time.
func (m *sim) giveUpWaiting(i int) {
	c := &m.cl[i]
	c.ticket.Cancel() // still in line: a release would have cleared c.ticket
	c.ticket = nil
	c.budget.line--
	m.lineChanged(-1)
	m.end(i, budgetDenied)
}

// end records how client i's request ended, now.
func (m *sim) end(i int, o outcome) {
	m.r.Clients[i].End = o
	m.r.LastEnd = max(m.r.LastEnd, m.now)
	m.r.GaveUp[m.slot()]++
	switch o {
	case exhausted:
		m.r.Exhausted++
	case budgetDenied:
		m.r.BudgetDenied++
	}
}

// slot returns the slot of now, growing the result's slices to hold it.
func (m *sim) slot() int {
	k := int(m.now / slot)
	r := m.r
	for len(r.Served) <= k {
		r.Served = append(r.Served, 0)
		r.Failed = append(r.Failed, 0)
		r.GaveUp = append(r.GaveUp, 0)
		r.InLine = append(r.InLine, 0)
	}
	return k
}

// lineChanged records that d retries joined the budgets' lines now (d < 0:
// left them).
func (m *sim) lineChanged(d int) {
	k := m.slot()
	if m.lineSlot < k { // the slots since the last change had the line as it was
		for j := m.lineSlot + 1; j <= k; j++ {
			m.r.InLine[j] = m.inLine
		}
	}
	m.lineSlot = k
	m.inLine += d
	m.r.InLine[k] = max(m.r.InLine[k], m.inLine)
}

// schedule returns how long the backoff schedule of a request would still
// take after its attempt n failed, prev being the wait before attempt n: the
// longest wait b gives before each retry left, as a Transport reckons the
// horizon of a wait in the budget's line.
func schedule(b retryhttp.Backoff, n, maxAttempts int, prev time.Duration) time.Duration {
	var total time.Duration
	for k := n - 1; k < maxAttempts-1; k++ {
		d := max(b.Delay(k, prev, topSample), 0)
		total = min(total+d, math.MaxInt64/2)
		prev = d
	}
	return total
}

// topSample is the largest uniform sample below 1: with it a Backoff gives
// its longest wait.
const topSample = 0x1p0 - 0x1p-53

// newRand returns the run's random source for a seed. A run draws the
// clients' start times from it first, then one sample per retry, in the
// order the retries happen, as a Transport shared by the clients would.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x6865726421)) // "herd!"
}

// startTimes draws each client's first attempt, uniform in [0, Spread).
func startTimes(sc scenario, rng *rand.Rand) []time.Duration {
	starts := make([]time.Duration, sc.Clients)
	if sc.Spread > 0 {
		for i := range starts {
			starts[i] = time.Duration(rng.Int64N(int64(sc.Spread)))
		}
	}
	return starts
}
