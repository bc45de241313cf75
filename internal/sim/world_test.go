package sim

// The world of one seed: the Transports under test and the layers around
// them, the run of its requests, and what is checked between them
// (goroutines and timers left over).

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// sim is one seed's simulation.
type sim struct {
	seed   uint64
	rng    *rand.Rand // the configuration and the requests, drawn on the bubble's main goroutine
	wide   *rand.Rand // the draws added since the bug table's seeds were found, so as not to move them
	more   *rand.Rand // the draws of issue 48 (see drawMore), stream 8
	jitter func() float64
	cfg    simConfig
	n      int // requests to send

	tr    *retryhttp.Transport // under test
	inner *retryhttp.Transport // the nested one, if any
	top   *simLayer            // records the attempts of tr
	clk   *testutil.TimerClock // the clock of a clocked seed's Transport, or nil: the real one

	lingering lingerGroup // the server's goroutines still at a request after answering

	mu        sync.Mutex
	reqs      []*simReq
	drawMu    sync.Mutex
	sending   map[string]*simReq   // the request each goroutine is in RoundTrip for; under drawMu
	keys      map[string]simKeyUse // the callers' keys sent so far (outer-layer memory)
	log       []string
	fails     []string
	figures   map[string]int
	hookCalls map[string]int
	bubble    string          // the tag of the bubble in goroutine headers
	baseline  map[string]bool // the goroutines of the bubble before the first request
	horizon   time.Time
	warmed    []simWarm // the warm-ups sent, in order (and the crowd: see sendCrowd)
	crowded   bool      // the crowd was sent
}

// lingerGroup is a WaitGroup that a goroutine may join while another waits
// for it: a hedge the Transport sends after its request returned may reach
// the server, and linger, while settle waits. (A channel, on which a wait
// is durably blocked in a synctest bubble.)
type lingerGroup struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
}

func (l *lingerGroup) Go(f func()) {
	l.mu.Lock()
	if l.n == 0 {
		l.idle = make(chan struct{})
	}
	l.n++
	l.mu.Unlock()
	go func() {
		defer func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.n--; l.n == 0 {
				close(l.idle)
			}
		}()
		f()
	}()
}

// Wait waits until no goroutine of the group runs.
func (l *lingerGroup) Wait() {
	for {
		l.mu.Lock()
		n, idle := l.n, l.idle
		l.mu.Unlock()
		if n == 0 {
			return
		}
		<-idle
	}
}

// simFarAway is how long after its start a seed's clock may run: the
// runtime's timers reach 2^63 ns after the clock's origin at most (the
// bubble's starts in 2000), and a timer set past that fires at once.
const simFarAway = 100 * 365 * 24 * time.Hour

type simKeyUse struct {
	attempts int
	last     time.Time
}

func newSim(seed uint64) *sim {
	rng := rand.New(rand.NewPCG(seed, 0))
	s := &sim{seed: seed, rng: rng, wide: rand.New(rand.NewPCG(seed, 3)), n: simRequests(seed), figures: make(map[string]int),
		hookCalls: make(map[string]int), keys: make(map[string]simKeyUse)}
	rng.IntN(6) // the draw simRequests made of its own
	s.cfg.burst = simBurst(seed)
	s.more = rand.New(rand.NewPCG(seed, 8))
	s.drawConfig()
	s.drawMore()
	s.drawHostWait()
	s.drawTimeline()
	s.drawResume()
	jitter := rand.New(rand.NewPCG(seed, 1))
	var mu sync.Mutex
	s.jitter = func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return jitter.Float64()
	}
	return s
}

// logf adds a line to the seed's trace.
func (s *sim) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

// failf records a broken invariant of request r (nil: of the seed).
func (s *sim) failf(r *simReq, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violate(r, format, args...)
}

// violate is failf for the checks, which hold s.mu.
func (s *sim) violate(r *simReq, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r != nil {
		msg = fmt.Sprintf("request %d (%s %s): %s", r.id, r.method, r.url, msg)
	}
	s.fails = append(s.fails, msg)
	s.log = append(s.log, "FAIL "+msg)
}

// count adds one to a figure of the run.
func (s *sim) count(name string) {
	s.mu.Lock()
	s.figures[name]++
	s.mu.Unlock()
}

// run builds the world and sends the seed's requests, one after another
// or all at once, checking the invariants after each.
func (s *sim) run() {
	defer func() {
		if v := recover(); v != nil {
			s.failf(nil, "the simulation panicked: %v\n%s", v, debug.Stack())
		}
	}()
	synctest.Wait()
	s.bubble, s.baseline = testutil.Census()
	s.horizon = time.Now().Add(simFarAway)
	s.build()
	for i := range s.n {
		s.reqs = append(s.reqs, s.newRequest(i+1))
	}
	s.logf("config: %s", s.cfg)
	if s.cfg.concurrent {
		s.runTogether()
	} else {
		for i, r := range s.reqs {
			time.Sleep(r.gap)
			s.do(r)
			s.settle()
			s.recordKey(r)
			s.check(r)
			r.cancel()
			synctest.Wait()
			s.checkStats()
			if r.pastHorizon {
				break
			}
			if s.cfg.warm > 0 && i < len(s.reqs)-1 && (len(r.attempts) > 1 || r.resp == nil || r.resp.StatusCode/100 != 2) {
				s.warmUp(r.req.URL.Host, r)
				s.settle()
				s.checkStats()
			}
		}
	}
	s.checkStats()
	s.checkResumeStats()
	s.tally()
}

// goroutine returns the calling goroutine's id.
func goroutine() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return testutil.GoroutineID(string(buf))
}

// sendingFor records that the calling goroutine is in RoundTrip for r (nil:
// no longer).
func (s *sim) sendingFor(r *simReq) {
	g := goroutine()
	s.drawMu.Lock()
	defer s.drawMu.Unlock()
	if s.sending == nil {
		s.sending = make(map[string]*simReq)
	}
	if r == nil {
		delete(s.sending, g)
		return
	}
	s.sending[g] = r
}

// tally adds what the Transport counted to the run's figures.
func (s *sim) tally() {
	st := s.tr.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		if !r.end.IsZero() {
			s.figures["requests"]++
			s.figures["server calls"] += len(r.calls)
		}
	}
	s.figures["Stats: attempts"] += int(st.Attempts)
	s.figures["Stats: retries"] += int(st.Retries)
	s.figures["Stats: hedges"] += int(st.Hedges)
	s.figures["Stats: hedge wins"] += int(st.HedgeWins)
	s.figures["Stats: budget waits"] += int(st.BudgetWaits)
	s.figures["Stats: budget denied"] += int(st.BudgetRefusals)
	s.figures["Stats: throttled"] += int(st.Throttled)
	s.figures["Stats: outer retries"] += int(st.RetriesFromAbove)
	s.figures["Stats: resumes"] += int(st.Resumes)
}

// runTogether sends the requests concurrently, each after its own delay,
// and checks them once all are done.
func (s *sim) runTogether() {
	var wg sync.WaitGroup
	for _, r := range s.reqs {
		wg.Go(func() {
			time.Sleep(r.after)
			s.do(r)
		})
	}
	wg.Wait()
	s.settle()
	if time.Now().After(s.horizon) {
		for _, r := range s.reqs {
			r.pastHorizon = true
		}
	}
	for _, r := range s.reqs {
		s.check(r)
	}
	for _, r := range s.reqs {
		r.cancel()
	}
	synctest.Wait()
}

// build makes the Transport under test and what lies beneath it. The base
// of each Transport is a clock.Source (simSource), through which it draws
// the seed's jitter: a clocked seed's Transport runs on a TimerClock, whose
// timers it counts, any other on the real clock (fake time in the bubble).
func (s *sim) build() {
	cfg := &s.cfg
	server := &simServer{s: s}
	s.top = &simLayer{s: s, next: server}
	var clk clock.Clock = clock.Real{}
	if cfg.clocked {
		s.clk = testutil.NewTimerClock()
		clk = s.clk
	}
	base := s.source(s.top, clk)
	switch cfg.nest {
	case nestBase: // a Transport as the Base of the one under test
		s.inner = &retryhttp.Transport{Base: base, Policy: simInnerPolicy, Budget: cfg.innerBudget}
		if cfg.crowd {
			s.inner.TrackHosts = cfg.trackHosts // its every host, through the crowd
		}
		base = s.source(s.inner, clock.Real{})
	case nestSDK: // a Transport reached inside an attempt, as by an SDK's client
		s.inner = &retryhttp.Transport{Base: s.source(server, clock.Real{}), Policy: simInnerPolicy,
			Budget: cfg.innerBudget}
		s.top.sdk = s.inner
	}
	s.tr = &retryhttp.Transport{Base: base, Policy: cfg.policy, Hosts: cfg.hosts, TrackHosts: cfg.trackHosts,
		Budget: cfg.budget, Logger: cfg.logger}
	s.hook(s.tr)
}

// simInnerPolicy is the policy of a nested Transport.
var simInnerPolicy = retryhttp.Policy{MaxAttempts: 3, Backoff: retryhttp.Constant(10 * time.Millisecond)}

// settle lets everything the last requests started end: the server's
// lingering goroutines, and the Transport's (hedges and drains), giving
// them time, up to 1,000 s, before what is still there counts as leaked.
func (s *sim) settle() {
	s.lingering.Wait()
	for step := 10 * time.Millisecond; ; step *= 10 {
		synctest.Wait()
		if len(s.leaks()) == 0 || step > 1000*time.Second {
			return
		}
		time.Sleep(step)
	}
}

// leaks returns the stacks of the goroutines of the bubble that were not
// there before the first request.
func (s *sim) leaks() []string {
	var out []string
	for _, g := range testutil.GoroutineStacks()[1:] {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, s.bubble) && !s.baseline[testutil.GoroutineID(header)] {
			out = append(out, g)
		}
	}
	return out
}

// ---- the clock and the jitter of the Transports ----

// simSource is a base as a clock.Source: the Transport above it runs on
// clk and on the seed's jitter. It unwraps to the base it holds, so that a
// Transport above another still sees that it is nested.
type simSource struct {
	http.RoundTripper
	clk    clock.Clock
	jitter func() float64
}

// source returns rt as a clock.Source of clk and the seed's jitter.
func (s *sim) source(rt http.RoundTripper, clk clock.Clock) simSource {
	return simSource{RoundTripper: rt, clk: clk, jitter: s.jitter}
}

func (b simSource) RetryClock() clock.Clock   { return b.clk }
func (b simSource) RetryRand() func() float64 { return b.jitter }
func (b simSource) Unwrap() http.RoundTripper { return b.RoundTripper }
