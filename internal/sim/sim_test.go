package sim

// The deterministic fault simulation. Each seed is one testing/synctest
// bubble: a real Transport, with a configuration drawn from the seed (the
// default one, UnlimitedBudget(), or random policies with layers and odd
// values), sends a few random requests through an in-memory base that
// injects faults (simServer), in fake time, and every invariant is checked
// after each request (check_test.go, verdict_test.go). The simulation
// reaches the Transport through the module's public API alone, and gives it
// its clock and jitter through its base, a clock.Source (world_test.go).
// Every draw comes from a PCG seeded by the seed: the server's per attempt
// (by request and attempt number, so that concurrent attempts draw the same
// whatever their order), the configuration and requests per seed, the
// Transport's jitter per seed. A failing seed replays, from the module's
// root, with
//
//	go test -run 'TestSim$' ./internal/sim/ -sim.seed=N -v
//
// which prints what happened to each request. CI runs the default, short
// run; a long one is
//
//	go test -run 'TestSim$' ./internal/sim/ -sim.n=1000000
//
// (The package comes before the -sim flags: go test hands a flag it does
// not know, and every argument after it, to the test binary.)
//
// Beyond the bugs in docs/simulation.md's table, which it finds with their
// fixes reverted, it found these, each pinned by a test of its own in the
// root package: a generated blank key sent as no key, so that a POST was
// retried unkeyed (TestGeneratedBlankKeyIsRefused); a PrepareRetry that
// panicked left the retry's attempt timeout and context behind
// (TestPrepareRetryPanicEndsTheRetrysContext); an SDK's retry marked by its
// attempt header reset its key's count of attempts
// (TestSDKAttemptHeaderKeepsTheKeysCount); a race's winner given up on or
// retried did not count the hedges, and its retry could exceed MaxAttempts
// (TestRetryAfterARaceCountsTheHedges); a Retryable that panicked on a
// hedged request's answer left the answer's body open
// (TestRetryablePanicClosesAHedgedAnswer); a race could leave a hedge timer
// armed after it ended (TestRaceEndStopsTheHedgeTimer); an outer Transport
// buffering the answer of an inner one that had retried retried again when
// the body was cut (TestOuterBufferingDoesNotRetryWhatAnInnerRetried).
//
// The draws and checks of issue 48 (more_test.go, reported_test.go,
// hedges_test.go, line_test.go) found its seven bugs, in docs/simulation.md's
// last table, while they were in the code (their tests come with their
// fixes): a failure returned unreported as the caller's context ended
// (checkReported); a host with a request in flight forgotten past 1024
// hosts (checkHostKept); a Backoff's n counting hedges (checkBackoffN); a
// hedge's Retry-After: 0 stopping the other copies (checkHedgesGo); time
// reading a failed body taken from the budget's line (checkLineRefusal);
// Retryable blind to a hedged request's other outcomes (checkJudged); and a
// race's retry going before a wait an answer asked (checkRaceWaits).
//
// The draws and checks of issue 49 (hostwait_test.go) set Policy.HostWait,
// and check that no first attempt goes to a host strictly inside a wait it
// told the Transport, nor later than HostWait unless told a new one, and
// that a request the host's wait ends gives up at once, saying so, never at
// its deadline (checkHostWait, checkHeldEnd). They found that a request
// with GetBody that its host's wait ended before its first attempt was left
// with its body open (seed 201; TestAHeldRequestPastItsDeadlineEndsAtOnce
// pins it now).
//
// The draw and check of the request timeline (timeline_test.go) set
// Policy.Timeline for half the seeds, and hold what Timeline returns to
// what the Transport's base got and OnRetry was told (checkTimeline).
// They found that an attempt's Duration ran until the request's goroutine
// judged its outcome, which a slow Retryable on another attempt's answer
// could hold for a minute (seed 1672;
// TestTimelineDurationsEndAsOutcomesComeBack).
//
// The draw and checks of resumed bodies (resume_test.go) make a third of
// the seeds' hosts serve GETs bodies that may be resumed, cut them, and
// answer their resumes well or not; checkResume holds what the caller read
// to the body first served, and each resume to the bytes it was given.
// They found that a cut body no resume followed was closed twice (seed
// 271; TestACutBodyThatIsNotResumedIsClosedOnce), and that a resume given
// up on for its failure status continued the body with that failure's
// bytes (seed 718; TestAFailedResumeGivenUpOnEndsTheBody).

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	simN    = flag.Int("sim.n", 8000, "requests TestSim sends, over as many seeds as that takes")
	simSeed = flag.Uint64("sim.seed", 0, "replay this seed of TestSim alone, printing its trace")
)

// simMaxFailures is how many failing seeds a run reports before it stops.
const simMaxFailures = 10

func TestSim(t *testing.T) {
	if *simSeed != 0 {
		res := runSeed(t, *simSeed)
		t.Logf("seed %d: %d requests\n%s", *simSeed, res.figures["requests"], res.trace)
		if len(res.fails) > 0 {
			t.Error(res.report())
		}
		return
	}
	seeds := simSeeds(*simN)
	workers := min(runtime.GOMAXPROCS(0), 8)
	var (
		mu       sync.Mutex
		figures  = make(map[string]int)
		failures int
	)
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for w := range workers {
			t.Run(fmt.Sprint(w), func(t *testing.T) {
				t.Parallel()
				for i := w; i < len(seeds); i += workers {
					mu.Lock()
					stop := failures >= simMaxFailures
					mu.Unlock()
					if stop {
						return
					}
					res := runSeed(t, seeds[i])
					mu.Lock()
					for k, v := range res.figures {
						figures[k] += v
					}
					if len(res.fails) > 0 {
						failures++
						t.Error(res.report())
					}
					mu.Unlock()
				}
			})
		}
	})
	t.Logf("simulated %d requests (%d seeds) in %v\n%s", figures["requests"], len(seeds),
		time.Since(start).Round(time.Millisecond), simFigures(figures))
}

// simSeeds returns the seeds, from 1, whose requests add up to at least n.
func simSeeds(n int) (seeds []uint64) {
	for seed, requests := uint64(1), 0; requests < n; seed++ {
		seeds = append(seeds, seed)
		requests += simRequests(seed)
	}
	return seeds
}

// simRequests returns how many requests seed sends: its first draw, and
// three more in a burst (see simBurst).
func simRequests(seed uint64) int {
	n := 1 + rand.New(rand.NewPCG(seed, 0)).IntN(6)
	if simBurst(seed) {
		n += 3 // a line forms from a few
	}
	return n
}

// simBurst reports whether seed sends its requests in a burst: all at
// once, within 20 ms, to one host, so that their retries meet in the
// host's budget line (a fifth of the seeds).
func simBurst(seed uint64) bool {
	return rand.New(rand.NewPCG(seed, 2)).IntN(5) == 0
}

// simFigures prints what the run counted: requests, faults, features.
func simFigures(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s %9d\n", k, m[k])
	}
	return b.String()
}

// A simResult is what one seed did and found.
type simResult struct {
	seed    uint64
	fails   []string
	trace   string
	figures map[string]int
}

func (r *simResult) report() string {
	return fmt.Sprintf("seed %d: %s\nreplay: go test -run 'TestSim$' ./internal/sim/ -sim.seed=%d -v",
		r.seed, strings.Join(r.fails, "\n  "), r.seed)
}

// runSeed runs seed in a bubble of its own. A panic of the bubble (a
// deadlock: a goroutine that never ends) is reported as the seed's
// failure.
func runSeed(t *testing.T, seed uint64) (res simResult) {
	res.seed = seed
	s := newSim(seed)
	defer func() {
		if v := recover(); v != nil {
			res.fails = append(res.fails, fmt.Sprintf("the bubble panicked: %v", v))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		res.fails, res.figures = append(res.fails, s.fails...), s.figures
		res.trace = strings.Join(s.log, "\n")
	}()
	synctest.Test(t, func(t *testing.T) { s.run() })
	return res
}
