package sim

// The simulation's configurations: the default Transport, UnlimitedBudget,
// and random policies in layers (Transport.Policy, Hosts, WithPolicy) with
// huge and odd values; hooks that record, fail or panic; and what the
// checks need of the policy a request follows, layered by the simulation
// itself.

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// How a seed nests Transports.
const (
	nestNone = iota
	nestBase // a Transport is the Base of the one under test
	nestSDK  // a Transport is reached inside each attempt, as through an SDK's client
)

// simConfig is what a seed's Transport is made of.
type simConfig struct {
	policy      retryhttp.Policy
	hosts       map[string]retryhttp.Policy
	budget      *retryhttp.Budget
	unlimited   bool // budget is UnlimitedBudget()
	innerBudget *retryhttp.Budget
	trackHosts  int
	logger      *slog.Logger
	nest        int
	clocked     bool // the Transport runs on a testutil.TimerClock
	concurrent  bool // the requests are sent at once
	burst       bool // ... within 20 ms, to one host: retries meet in its budget's line
	hooks       bool // OnRetry and OnGiveUp record
	prepare     bool // PrepareRetry changes each retry's copy
	prepErr     int  // PrepareRetry fails one call in prepErr (0: never)
	panicHook   string
	panicAt     int // the call of panicHook that panics
	faultRate   float64
	verdict     bool     // each request is made inside an AdviceHandler's handler
	conflicts   bool     // keys on, under a Statuses list; a third of the failures are 409s
	racing      bool     // every request hedged after 1 ms, its answers drawn to race (see drawRace)
	sizes       simSizes // budget's
	warm        int      // successes sent to the first request's host after it (see drawTinyBudget)
	flaky       bool     // each request's first attempt fails (502), every later one succeeds (see drawTinyBudget)
	kind        int      // kindRandom, kindDefault or kindUnlimited
	desc        []string

	// The draws of issue 48 (see drawMore).
	cancelAnswers  bool // the caller cancels as a quarter of the answers arrive (see cancelAtAnswer)
	raceMore       bool // racing (see startRace): answers drawn to race long (see raceLatency, moreWaits)
	zeroWaits      bool // ... most failures asking Retry-After: 0 (see drawZeroWaits)
	hostPerRequest bool // each request to a host of its own: its hedges have the host's whole allowance
	slowFail       bool // a burst whose failed bodies take 10 to 80 ms to read (see drawSlowFailures)
	crowd          bool // simCrowd other hosts requested during request 1's first attempt (see sendCrowd)

	// The draws of issue 49 (see drawHostWait).
	hostWait  bool    // Policy.HostWait is set: a host's wait holds its new requests
	oneHost   bool    // ... every request to a.sim
	limitRate float64 // ... so many of the attempts answered as a rate-limited host would (see limitedAnswer)

	// The draw of the request timeline (see drawTimeline).
	timelineEach bool // Policy.Timeline set for each request alone, through WithPolicy, for half of them

	// The draw of resumed bodies (see drawResume).
	resumable  bool // the hosts answer GETs with bodies that may be resumed, and cut them
	resumeEach bool // Policy.ResumeResponse set for each request alone, through WithPolicy, for half of them
}

func (c simConfig) String() string { return strings.Join(c.desc, "; ") }

// drawConfig draws the seed's configuration: a quarter of the seeds the
// default Transport, a quarter UnlimitedBudget(), the rest random.
func (s *sim) drawConfig() {
	rng, c := s.rng, &s.cfg
	c.faultRate = pick(rng, 0, 0.1, 0.3, 0.5, 0.8, 0.95)
	c.clocked = rng.IntN(2) == 0
	c.concurrent = rng.IntN(5) == 0
	if c.burst {
		c.concurrent = true
	}
	c.hooks = rng.IntN(10) != 0
	c.verdict = s.wide.IntN(3) == 0
	c.desc = append(c.desc, fmt.Sprintf("faults %v, clocked %v, concurrent %v, burst %v, hooks %v, verdict %v",
		c.faultRate, c.clocked, c.concurrent, c.burst, c.hooks, c.verdict))
	switch rng.IntN(4) {
	case 0:
		c.desc = append(c.desc, "the default Transport")
		c.sizes, c.kind = defaultSizes, kindDefault
		s.count("config: default Transport")
		return
	case 1:
		c.budget, c.unlimited = retryhttp.UnlimitedBudget(), true
		c.sizes.unlimited, c.kind = true, kindUnlimited
		c.desc = append(c.desc, "UnlimitedBudget")
		s.count("config: UnlimitedBudget")
		return
	}
	s.count("config: random")
	c.nest = pick(rng, nestNone, nestNone, nestNone, nestNone, nestNone, nestBase, nestSDK)
	if rng.IntN(8) == 0 {
		c.panicHook = pick(rng, "OnRetry", "OnGiveUp", "PrepareRetry", "Retryable", "Backoff", "Generate")
		c.panicAt = 1 + rng.IntN(3)
		c.desc = append(c.desc, fmt.Sprintf("%s panics at its call %d", c.panicHook, c.panicAt))
	}
	c.policy = s.drawPolicy("policy")
	if s.wide.IntN(2) == 0 {
		// Keys on, under a Statuses list that leaves 409 out.
		c.policy.Statuses = pick(s.wide, []int{}, []int{503}, []int{500, 503, 429})
		c.policy.IdempotencyKeys = &retryhttp.IdempotencyKeys{
			Methods: []string{http.MethodPost, http.MethodPatch, http.MethodGet, http.MethodPut}}
		c.conflicts = true
		c.desc = append(c.desc, fmt.Sprintf("keys on, Statuses %v, a third of failures 409", c.policy.Statuses))
		s.count("config: keys and a Statuses list")
	}
	if s.wide.IntN(4) == 0 && s.hedgesAllowed() {
		// A race on every request slower than a millisecond: losing
		// answers to drain, and answers that ask for waits in a race.
		c.policy.Hedge = &retryhttp.Hedge{After: time.Millisecond, MaxHedges: 2, Fraction: 1}
		c.desc = append(c.desc, "every request hedged after 1 ms")
		s.count("config: hedged after 1 ms")
	}
	if rng.IntN(2) == 0 {
		c.hosts = make(map[string]retryhttp.Policy)
		for range 1 + rng.IntN(3) {
			key := pick(rng, "a.sim", "B.SIM.", "b.sim:8080", "*.sim", "c.other", "x.a.sim")
			c.hosts[key] = s.drawPolicy("host " + key)
		}
	}
	var name string
	c.budget, name, c.sizes = drawBudget(rng)
	c.unlimited = name == "unlimited"
	c.innerBudget, _, _ = drawBudget(rng)
	c.trackHosts = pick(rng, 0, 1, 100)
	if rng.IntN(3) == 0 {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c.prepare = rng.IntN(2) == 0
	c.prepErr = pick(rng, 0, 0, 3, 1)
	c.desc = append(c.desc, fmt.Sprintf("budget %s, TrackHosts %d, logger %v, nest %d, PrepareRetry %v (fails 1 in %d)",
		name, c.trackHosts, c.logger != nil, c.nest, c.prepare, c.prepErr))
	s.drawTinyBudget()
	s.drawRace()
}

// drawRace makes half the random seeds race (of those not hedged yet, nor
// testing a tiny ratio or keyed 409s, which hedges would hide): every
// request is hedged after 1 ms, and its attempts' answers are drawn to
// race (see raceRand). (Streams of their own, so that the seed's other
// draws stay as they were.)
func (s *sim) drawRace() {
	c := &s.cfg
	if s.wide.IntN(2) != 0 || !s.hedgesAllowed() || c.policy.Hedge != nil || c.warm > 0 || c.conflicts {
		return
	}
	c.policy.Hedge = &retryhttp.Hedge{After: time.Millisecond, MaxHedges: 2, Fraction: 1}
	c.racing = true
	c.faultRate = max(c.faultRate, 0.5) // failures to race
	c.desc = append(c.desc, "every request hedged after 1 ms, its answers racing")
	s.count("config: racing")
}

func drawBudget(rng *rand.Rand) (*retryhttp.Budget, string, simSizes) {
	switch rng.IntN(6) {
	case 0:
		return nil, "default", defaultSizes
	case 1:
		return retryhttp.UnlimitedBudget(), "unlimited", simSizes{unlimited: true}
	}
	ratio := pick(rng, 0, 0.2, -1, math.NaN(), 1e9)
	credit := pick[int](rng, 0, 2, 10, -5, 1e9)
	return retryhttp.NewBudget(ratio, credit), fmt.Sprintf("NewBudget(%v, %v)", ratio, credit), sizesOf(ratio, credit)
}

// hedgesAllowed reports whether the seed may hedge: not when OnRetry or
// PrepareRetry panics, as a hedge's run on a timer's goroutine, where a
// panic ends the program (as documented), nor when a policy's hook panics
// in a nested Transport, which a hedge reaches on that goroutine too.
func (s *sim) hedgesAllowed() bool {
	switch s.cfg.panicHook {
	case "":
		return true
	case "Retryable", "Backoff", "Generate":
		return s.cfg.nest == nestNone
	}
	return false
}

// drawPolicy draws a policy: each field left zero, or set to a usual or an
// odd value. what names it in the trace.
func (s *sim) drawPolicy(what string) retryhttp.Policy {
	rng := s.rng
	var p retryhttp.Policy
	set := func() bool { return rng.IntN(3) == 0 }
	if set() {
		p.MaxAttempts = pick(rng, 1, 2, 3, 5, 8, -1, 1000, math.MaxInt)
	}
	if set() || s.cfg.panicHook == "Backoff" {
		p.Backoff = s.drawBackoff()
	}
	if set() {
		p.Statuses = pick(rng, []int{}, []int{503}, []int{500, 503, 429}, []int{-1, 700, 999, 0, 502}, []int{404, 503})
	}
	if set() || s.cfg.panicHook == "Retryable" {
		p.Retryable = s.retryable(pick(rng, "keep", "again", "refuse 502", "peek"))
	}
	if set() {
		p.AttemptTimeout = pick(rng, -1, time.Nanosecond, time.Millisecond, 100*time.Millisecond,
			2*time.Second, 30*time.Second, math.MaxInt64)
	}
	if set() {
		p.MaxRetryAfter = pick(rng, -time.Second, time.Nanosecond, time.Second, 5*time.Second, time.Hour, math.MaxInt64)
	}
	if set() {
		p.MaxBufferedBody = pick[int64](rng, -1, 1, 100, 64<<10, math.MaxInt64)
	}
	if set() {
		p.BufferResponse = pick[int64](rng, -1, 1, 100, 64<<10, math.MaxInt64)
	}
	if set() || s.cfg.panicHook == "Generate" {
		p.IdempotencyKeys = s.drawKeys()
	}
	if set() {
		p.Throttle = pick(rng, &retryhttp.Throttle{}, &retryhttp.Throttle{Off: true},
			&retryhttp.Throttle{K: math.NaN()}, &retryhttp.Throttle{K: 0.5, Window: time.Millisecond},
			&retryhttp.Throttle{K: 1e9}, &retryhttp.Throttle{Window: -1})
	}
	if rng.IntN(2) == 0 && s.hedgesAllowed() {
		p.Hedge = pick(rng, &retryhttp.Hedge{}, &retryhttp.Hedge{After: time.Millisecond},
			&retryhttp.Hedge{After: time.Millisecond, MaxHedges: 3},
			&retryhttp.Hedge{After: 10 * time.Millisecond, MaxHedges: 2, Fraction: 1},
			&retryhttp.Hedge{After: -1, MaxHedges: 3}, &retryhttp.Hedge{Off: true},
			&retryhttp.Hedge{MaxHedges: 1000, After: 5 * time.Millisecond},
			&retryhttp.Hedge{Quantile: math.NaN(), Min: -1, Max: -1},
			&retryhttp.Hedge{Min: time.Hour, Max: time.Millisecond},
			&retryhttp.Hedge{Fraction: 2, After: 2 * time.Millisecond}, &retryhttp.Hedge{Fraction: math.NaN()})
	}
	s.cfg.desc = append(s.cfg.desc, fmt.Sprintf("%s %s", what, describePolicy(p)))
	return p
}

func describePolicy(p retryhttp.Policy) string {
	return fmt.Sprintf("{MaxAttempts %d, Backoff %T, Statuses %v, Retryable %v, AttemptTimeout %v, "+
		"MaxRetryAfter %v, MaxBufferedBody %d, BufferResponse %d, Keys %+v, Throttle %+v, Hedge %+v}",
		p.MaxAttempts, p.Backoff, p.Statuses, p.Retryable != nil, p.AttemptTimeout, p.MaxRetryAfter,
		p.MaxBufferedBody, p.BufferResponse, p.IdempotencyKeys, p.Throttle, p.Hedge)
}

// drawBackoff draws a Backoff from the seed's stream.
func (s *sim) drawBackoff() retryhttp.Backoff { return s.drawBackoffFrom(s.rng) }

// drawBackoffFrom draws a Backoff from rng, recorded (see recordBackoff)
// unless it is the one planned to panic.
func (s *sim) drawBackoffFrom(rng *rand.Rand) retryhttp.Backoff {
	b := pick[retryhttp.Backoff](rng, retryhttp.Constant(0), retryhttp.Constant(-time.Second),
		retryhttp.Constant(time.Hour), retryhttp.FullJitter{},
		retryhttp.FullJitter{Base: time.Second, Cap: time.Millisecond},
		retryhttp.FullJitter{Base: -1, Cap: math.MaxInt64},
		retryhttp.EqualJitter{Base: 10 * time.Millisecond}, retryhttp.DecorrelatedJitter{},
		retryhttp.DecorrelatedJitter{Base: time.Hour, Cap: -1},
		testutil.BackoffFunc(func(n int, _ time.Duration, _ float64) time.Duration {
			return 1 << min(n, 62) // exponential from 1 ns, uncapped
		}),
		testutil.BackoffFunc(func(n int, _ time.Duration, u float64) time.Duration {
			if n%2 == 1 {
				return math.MaxInt64
			}
			return -time.Duration(u * float64(time.Second))
		}))
	if s.cfg.panicHook != "Backoff" {
		return s.recordBackoff(b)
	}
	return testutil.BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
		s.hookCalled("Backoff")
		return b.Delay(n, prev, u)
	})
}

// A simDraw is a call of a Backoff: for retry n, after prev; retries is
// how many retries (not hedges) OnRetry had been told of by then.
type simDraw struct {
	n       int
	prev    time.Duration
	u       float64
	retries int
}

// recordBackoff returns b, its calls recorded in the request whose
// RoundTrip's goroutine makes them, for checkPrev.
func (s *sim) recordBackoff(b retryhttp.Backoff) retryhttp.Backoff {
	return testutil.BackoffFunc(func(n int, prev time.Duration, u float64) time.Duration {
		g := goroutine()
		s.drawMu.Lock() // not s.mu: the checks, which hold it, call Backoffs too
		r := s.sending[g]
		s.drawMu.Unlock()
		if r != nil && !s.readingBody(r) { // (a request's goroutine, which holds no lock of the simulation's)
			s.mu.Lock()
			r.draws = append(r.draws, simDraw{n, prev, u, r.retriesMade()})
			s.mu.Unlock()
		}
		return b.Delay(n, prev, u)
	})
}

func (s *sim) drawKeys() *retryhttp.IdempotencyKeys {
	k := pick(s.rng, retryhttp.IdempotencyKeys{}, retryhttp.IdempotencyKeys{Quoted: true},
		retryhttp.IdempotencyKeys{Header: "x-request-key"}, retryhttp.IdempotencyKeys{Off: true},
		retryhttp.IdempotencyKeys{Methods: []string{"POST", "GET", "put"}})
	mode := pick(s.rng, "uuid", "uuid", "counter", "error", "empty", "blank", "newline")
	if s.cfg.panicHook == "Generate" {
		mode = "counter"
	}
	s.cfg.desc = append(s.cfg.desc, "keys generated: "+mode)
	var n atomic.Int64
	if mode != "uuid" {
		k.Generate = func(*http.Request) (string, error) {
			s.hookCalled("Generate")
			switch mode {
			case "error":
				return "", fmt.Errorf("sim: no key")
			case "empty":
				return "", nil
			case "blank":
				return " \t ", nil
			case "newline":
				return "key\nbroken", nil
			}
			return fmt.Sprintf("key-%d-%d", s.seed, n.Add(1)), nil
		}
	}
	return &k
}

// ---- the policy a request follows ----

// simDefaultMaxRetryAfter is the MaxRetryAfter of a policy that sets none,
// as the documentation of Policy.MaxRetryAfter says.
const simDefaultMaxRetryAfter = 30 * time.Second

// simPolicy is what the checks need of the policy a request follows.
type simPolicy struct {
	max      int // MaxAttempts
	backoff  retryhttp.Backoff
	keys     *retryhttp.IdempotencyKeys
	maxRA    time.Duration
	buffered bool  // BufferResponse: a body is read after its attempt's base returned
	statuses []int // Statuses, if a layer sets them (nil: the defaults)
	judged   bool  // Retryable: a hook judges each attempt
	hedge    bool
	hedgeP   *retryhttp.Hedge // the Hedge in force, if hedge
	timeout  time.Duration    // AttemptTimeout (0: none)
	throttle bool
	hostWait time.Duration // HostWait (0: off)
	timeline bool          // Timeline: the Transport records each attempt
	resume   bool          // ResumeResponse: a body that breaks is resumed
}

// layered returns the policy of the layers ps, the most specific first, as
// the documentation of Policy says they layer.
func layered(ps ...retryhttp.Policy) simPolicy {
	var e simPolicy
	var hedge *retryhttp.Hedge
	var throttle *retryhttp.Throttle
	var bufferResponse int64
	for _, p := range ps {
		if e.max == 0 {
			e.max = p.MaxAttempts
		}
		if e.backoff == nil {
			e.backoff = p.Backoff
		}
		if e.keys == nil {
			e.keys = p.IdempotencyKeys
		}
		if e.maxRA <= 0 {
			e.maxRA = p.MaxRetryAfter
		}
		if bufferResponse == 0 {
			bufferResponse = p.BufferResponse
		}
		if e.timeout == 0 {
			e.timeout = p.AttemptTimeout
		}
		if e.statuses == nil {
			e.statuses = p.Statuses
		}
		e.judged = e.judged || p.Retryable != nil
		if hedge == nil {
			hedge = p.Hedge
		}
		if throttle == nil {
			throttle = p.Throttle
		}
		if e.hostWait == 0 {
			e.hostWait = p.HostWait
		}
		e.timeline = e.timeline || p.Timeline // (a layer cannot undo it)
		e.resume = e.resume || p.ResumeResponse
	}
	if e.max == 0 {
		e.max = 4 // a zero Policy's MaxAttempts
	}
	if e.backoff == nil {
		e.backoff = retryhttp.FullJitter{} // a zero Policy's Backoff
	}
	e.max = max(e.max, 1)
	if e.maxRA <= 0 {
		e.maxRA = simDefaultMaxRetryAfter
	}
	e.buffered = bufferResponse > 0
	e.timeout = max(e.timeout, 0)
	e.hedge = hedge != nil && !hedge.Off
	if e.hedge {
		e.hedgeP = hedge
	}
	e.throttle = throttle != nil && !throttle.Off
	e.hostWait = max(e.hostWait, 0)
	return e
}

// keysFor reports whether the policy adds a key to a request of method.
func (e simPolicy) keysFor(method string) bool {
	if e.keys == nil || e.keys.Off || e.max <= 1 {
		return false // no key where no retry can follow
	}
	if len(e.keys.Methods) == 0 {
		return method == "POST" || method == "PATCH"
	}
	return slices.Contains(e.keys.Methods, method)
}

// hostEntry returns the entry of hosts for u, as Transport.Hosts says it
// is found: host:port, then host, then the longest *.suffix.
func hostEntry(hosts map[string]retryhttp.Policy, u *url.URL) (retryhttp.Policy, bool) {
	norm := make(map[string]retryhttp.Policy, len(hosts))
	for k, p := range hosts {
		norm[strings.TrimSuffix(strings.ToLower(k), ".")] = p
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "80"
	}
	if p, ok := norm[host+":"+port]; ok {
		return p, true
	}
	if p, ok := norm[host]; ok {
		return p, true
	}
	best, found := "", false
	var bp retryhttp.Policy
	for k, p := range norm {
		if suffix, ok := strings.CutPrefix(k, "*."); ok && strings.HasSuffix(host, "."+suffix) && len(suffix) > len(best) {
			best, bp, found = suffix, p, true
		}
	}
	return bp, found
}
