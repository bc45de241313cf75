package sim

// The budget's part of the simulation: budgets of odd and tiny sizes, a
// host warmed by many successes between a seed's requests, and the check
// that the budget keeps no credit its sizes owe a request alone.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/budget"
)

// simSizes is what a seed's budget holds by its sizes: the credit and the
// ratio, as NewBudget's doc says it keeps them, or unlimited.
type simSizes struct {
	ratio     float64
	credit    int
	unlimited bool
}

// sizesOf returns the sizes of NewBudget(ratio, credit) by its doc: a
// ratio below zero (or NaN) counts as zero, above 1000 as 1000, and is kept
// to a billionth; a credit below zero as zero, above a million as a million.
func sizesOf(ratio float64, credit int) simSizes {
	if !(ratio > 0) {
		ratio = 0
	}
	ratio = math.Round(min(ratio, 1000)*1e9) / 1e9
	return simSizes{ratio: ratio, credit: min(max(credit, 0), 1_000_000)}
}

// defaultSizes are the sizes of the default Transport's budget.
var defaultSizes = simSizes{ratio: budget.DefaultRatio, credit: budget.DefaultCredit}

// drawTinyBudget draws, for a fifth of the random seeds that send one
// request at a time, a budget whose ratio is far below a success's worth
// and rounds down at a thousandth, and a number of successes that earns a
// retry of credit by it: the seed sends its requests to one host, half
// their attempts at least failing, and the successes after each request
// that failed an attempt (see warmUp). (A stream of its own, so that the
// seed's other draws stay as they were.)
func (s *sim) drawTinyBudget() {
	c := &s.cfg
	if s.wide.IntN(5) != 0 || c.concurrent || c.nest != nestNone || c.panicHook != "" || throttles(c) {
		return
	}
	ratio := pick(s.wide, 0.0004, 0.0014)
	credit := pick(s.wide, 1, 2)
	c.budget, c.sizes, c.unlimited = retryhttp.NewBudget(ratio, credit), sizesOf(ratio, credit), false
	if rand.New(rand.NewPCG(s.seed, 5)).IntN(2) == 0 { // (a stream of its own)
		// A healthy, flaky host: every request's retry succeeds and gives
		// its credit back, so that no request is ever refused.
		c.budget, c.sizes = retryhttp.NewBudget(ratio, 1), sizesOf(ratio, 1)
		c.flaky = true
		c.desc = append(c.desc, fmt.Sprintf("budget NewBudget(%v, 1), each request's first attempt a 502", ratio))
		s.count("config: a tiny credit, a flaky host")
		return
	}
	c.warm = int(float64(credit)*1.05/ratio) + s.wide.IntN(100)
	c.faultRate = max(c.faultRate, 0.5) // failures to spend the credit, and to be refused
	c.desc = append(c.desc, fmt.Sprintf("budget NewBudget(%v, %v), %d successes after the first request",
		ratio, credit, c.warm))
	s.count("config: a tiny ratio, successes to earn by it")
}

// throttles reports whether a layer of the configuration throttles, which
// may refuse a warm-up after the first request's failures.
func throttles(c *simConfig) bool {
	on := func(p retryhttp.Policy) bool { return p.Throttle != nil && !p.Throttle.Off }
	for _, p := range c.hosts {
		if on(p) {
			return true
		}
	}
	return on(c.policy)
}

// warmUp sends cfg.warm HEADs to host, each answered 200 at once, after
// the seed's request after, and records them in s.warmed. (HEAD, which no configuration gives a key
// that might fail to generate.)
func (s *sim) warmUp(host string, after *simReq) {
	w := &simReq{id: -1, warm: true, dups: make(map[int]int)}
	ctx := context.WithValue(context.Background(), simReqKey{}, w)
	for i := range s.cfg.warm {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, fmt.Sprintf("http://%s/warm/%d", host, i), nil)
		if err != nil {
			s.failf(nil, "warm-up request: %v", err)
			return
		}
		resp, err := s.tr.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			s.failf(nil, "warm-up request %d to %s failed: %v", i, host, err)
			return
		}
		resp.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(w.giveUps) > 0 || len(w.attempts) != s.cfg.warm {
		s.violate(nil, "warm-up: %d attempts of %d requests, %d given up", len(w.attempts), s.cfg.warm, len(w.giveUps))
	}
	w.end = time.Now()
	s.warmed = append(s.warmed, simWarm{host: host, n: s.cfg.warm, attempts: len(w.attempts), at: w.end, after: after})
}

// simWarm is a run of warm-up successes to a host.
type simWarm struct {
	host        string
	n, attempts int
	at          time.Time
	after       *simReq // the request it followed
}

// checkBudgetOwed: a request alone at its host, no other request having
// failed there in the 10 s before it, is refused a retry for the budget
// (ReasonBudget) only when its host's credit, by the budget's rules and
// sizes, cannot pay for one. The credit counted is a lower bound: full at
// the host's first request, refilled wholly in 10 s, and capped at the
// credit only before each request's spending. Each earlier request spends
// one for each attempt after its first but those the server timed (a
// retry whose wait a Retry-After or RateLimit set spends nothing); one that
// ended in a 2xx answer gives one back if its answer came from an attempt
// that paid (a healthy, flaky host is never refused), and earns ratio
// otherwise. Where OnRetry did not record what set each wait, every attempt
// after the first counts as paid and a 2xx answer earns the lesser of
// ratio and one. A request that ended otherwise after an attempt counts as
// a failure of the host.
func (s *sim) checkBudgetOwed(r *simReq) {
	sz := s.cfg.sizes
	if sz.unlimited || s.cfg.concurrent || s.cfg.nest != nestNone || r.panicked != nil || r.pastHorizon ||
		r.pol.judged || s.reason(r) != retryhttp.ReasonBudget {
		return
	}
	host := r.req.URL.Host
	if s.resumedAt(host, r) {
		return
	}
	credit, ratio := float64(sz.credit), sz.ratio
	balance, since := credit, time.Time{}
	var failed time.Time           // another request's last failure at the host, if no success followed
	refill := func(to time.Time) { // less a millionth, for the budget's rounding
		if !since.IsZero() && to.After(since) {
			balance = min(credit, balance+max(credit*to.Sub(since).Seconds()/10-1e-6, 0))
		}
		since = to
	}
	for _, q := range s.reqs {
		if q == r {
			break
		}
		if q.req != nil && q.req.URL.Host == host && !q.end.IsZero() && len(q.attempts) > 0 {
			refill(q.end)
			spent, earned := creditOf(q, ratio)
			balance = max(balance-spent, 0)
			if q.err == nil && q.resp != nil && q.resp.StatusCode/100 == 2 && !q.pol.judged {
				balance, failed = min(credit, balance+earned), time.Time{}
			} else {
				failed = q.end
			}
		}
		for _, w := range s.warmed {
			if w.after == q && w.host == host {
				refill(w.at)
				balance, failed = min(credit, balance+float64(w.n)*ratio), time.Time{}
			}
		}
	}
	if !failed.IsZero() && r.start.Sub(failed) < 10*time.Second {
		return // another request failed the host in the last 10 s: the line may hold the retry
	}
	refill(r.start)
	spent, _ := creditOf(r, ratio)
	if owed := balance - spent; owed >= 1 {
		s.violate(r, "refused a retry for the budget after %d attempts alone at %s, with %.3f retries of credit owed "+
			"(ratio %v, credit %d)", len(r.attempts), host, owed, ratio, sz.credit)
	}
}

// creditOf returns what request q spent of its host's credit at the most,
// and what a 2xx answer to it earns at the least (see checkBudgetOwed).
func creditOf(q *simReq, ratio float64) (spent, earned float64) {
	n := len(q.attempts) - 1
	if n < 0 || len(q.retries) != n {
		return float64(max(n, 0)), min(ratio, 1) // OnRetry did not record each wait
	}
	paid := make([]bool, n+2) // by attempt number: the event before attempt k+2 is the k-th
	for k, e := range q.retries {
		if e.Source != "Retry-After" && e.Source != "RateLimit" {
			paid[k+2] = true
			spent++
		}
	}
	earned = ratio
	if q.resp != nil {
		if k := retryhttp.Attempts(q.resp); k > 1 && k < len(paid) && paid[k] {
			earned = 1
		}
	}
	return spent, earned
}

// reason returns why the Transport stopped retrying request r, if it says:
// its error's Reason, or OnGiveUp's; 0 if neither.
func (s *sim) reason(r *simReq) retryhttp.Reason {
	if e, ok := r.err.(*retryhttp.Error); ok {
		return e.Reason
	}
	if len(r.giveUps) == 1 {
		return r.giveUps[0].Reason
	}
	return 0
}
