package retryhttp

// The caller's policy is the contract: a request alone gets exactly its
// policy from the default budget, as from UnlimitedBudget(); a sequential
// worker in an outage fails fast; a sized budget bounds what its doc says.
// Everything runs in fake time against in-memory bases. Print the figures
// with:
//
//	go test -run 'TestBudgetContract|TestAlone|TestSparse|TestSequential|TestSized' -v .

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// loneCase is one request alone: its policy, its deadline (0: none), and
// how its host answers: failures attempts failing (a 503, or a reset when
// reset is set), then 200.
type loneCase struct {
	name     string
	policy   Policy
	deadline time.Duration
	failures int
	reset    bool
	seed     uint64
}

// loneRun is what one request went through.
type loneRun struct {
	at     []time.Duration // when each attempt reached the host, since the request began
	served bool
	reason Reason // the give-up's, if it was not served
	delays []time.Duration
}

// runLone sends c's request through tr's copy made by mk over a fresh host,
// in the calling bubble, and returns what it went through.
func runLone(t *testing.T, c loneCase, budget *Budget) loneRun {
	t.Helper()
	base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
		if n > c.failures {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		if c.reset {
			return testutil.ResetByPeer(n, req)
		}
		return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
	}}
	tr := &Transport{Base: base, Policy: c.policy, Budget: budget, rand: lockedRand(c.seed)}
	h := new(hookLog).watch(tr)
	ctx := context.Background()
	if c.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.deadline)
		defer cancel()
	}
	start := time.Now()
	resp, err := testutil.RoundTrip(t, tr, testutil.Get(t, ctx))
	var run loneRun
	for _, at := range base.Calls() {
		run.at = append(run.at, at.Sub(start))
	}
	if err == nil {
		resp.Body.Close()
		run.served = resp.StatusCode == http.StatusOK
	}
	if rs := h.reasons(); len(rs) > 0 {
		run.reason = rs[0]
	}
	for _, e := range h.retries {
		run.delays = append(run.delays, e.Delay)
	}
	return run
}

// loneCases are requests alone: three of chosen policies and deadlines,
// and every strategy at up to 6 attempts with and without a deadline.
func loneCases() []loneCase {
	cs := []loneCase{
		{name: "Constant(1ms), 5 attempts, 4 failures", policy: Policy{Backoff: Constant(time.Millisecond), MaxAttempts: 5}, failures: 4},
		{name: "Constant(0), 2 attempts, 1 s deadline, 500 then 200", policy: Policy{Backoff: Constant(0), MaxAttempts: 2}, deadline: time.Second, failures: 1},
		{name: "Constant(50ms), 4 attempts, 1 s deadline, 3 failures", policy: Policy{Backoff: Constant(50 * time.Millisecond), MaxAttempts: 4}, deadline: time.Second, failures: 3},
	}
	strategies := []struct {
		name string
		b    Backoff
	}{
		{"default", nil},
		{"Constant(0)", Constant(0)},
		{"Constant(1ms)", Constant(time.Millisecond)},
		{"FullJitter", FullJitter{Base: 50 * time.Millisecond, Cap: time.Second}},
		{"EqualJitter", EqualJitter{Base: 50 * time.Millisecond, Cap: time.Second}},
		{"DecorrelatedJitter", DecorrelatedJitter{Base: 50 * time.Millisecond, Cap: time.Second}},
		{"exponential", exponential{Base: 10 * time.Millisecond, Cap: time.Second}},
		{"BackoffFunc", testutil.BackoffFunc(func(n int, _ time.Duration, u float64) time.Duration {
			return time.Duration(n+1) * time.Duration(float64(30*time.Millisecond)*(0.5+u))
		})},
	}
	for _, s := range strategies {
		for _, attempts := range []int{2, 4, 6} {
			for _, deadline := range []time.Duration{0, 5 * time.Second} {
				for _, reset := range []bool{false, true} {
					cs = append(cs, loneCase{
						name:   fmt.Sprintf("%s, %d attempts, deadline %v, reset %v", s.name, attempts, deadline, reset),
						policy: Policy{Backoff: s.b, MaxAttempts: attempts}, deadline: deadline,
						failures: attempts - 1, reset: reset, seed: uint64(len(cs)),
					})
				}
			}
		}
	}
	return cs
}

// TestAloneTheBudgetIsInvisible: a request alone (no other request to its
// host, no failure of another) gets exactly its policy from the default
// budget: the same attempts at the same instants as with
// UnlimitedBudget(), for any Backoff, up to 6 attempts, with or without a
// deadline; its own failures are no evidence against its host.
func TestAloneTheBudgetIsInvisible(t *testing.T) {
	for _, c := range loneCases() {
		t.Run(c.name, func(t *testing.T) {
			var def, unl loneRun
			synctest.Test(t, func(t *testing.T) { def = runLone(t, c, nil) })
			synctest.Test(t, func(t *testing.T) { unl = runLone(t, c, UnlimitedBudget()) })
			assert.Equal(t, unl.at, def.at, "attempt instants: the default budget's against UnlimitedBudget's")
			assert.Equal(t, unl.served, def.served)
			assert.Equal(t, unl.reason, def.reason)
			assert.Equal(t, unl.delays, def.delays, "OnRetry's delays")
		})
	}
}

// TestAloneDefaultCreditCoversFiveRetries: the default budget's credit
// pays for at least 5 retries of a request alone, with the Transport's
// first use or after 10 s without retries.
func TestAloneDefaultCreditCoversFiveRetries(t *testing.T) {
	c := loneCase{policy: Policy{Backoff: Constant(time.Millisecond), MaxAttempts: 6}, failures: 5}
	synctest.Test(t, func(t *testing.T) {
		run := runLone(t, c, nil)
		assert.Len(t, run.at, 6)
		assert.True(t, run.served)
	})
}

// loneGets sends n GETs through one Transport, gap apart, each failing
// failures times (503, or reset every other GET) and then served, each with
// deadline; it returns how many were served within their policy and the
// longest one.
func loneGets(t *testing.T, budget *Budget, n, failures int, gap, deadline time.Duration) (served int, longest time.Duration) {
	t.Helper()
	dep := newFaultServer(0, func(a faultAttempt) (int, http.Header, error) {
		if a.n <= failures {
			if a.draw(0) < 0.5 {
				return 0, nil, testutil.ErrReset()
			}
			return http.StatusServiceUnavailable, nil, nil
		}
		return http.StatusOK, nil, nil
	})
	tr := &Transport{Base: dep, Budget: budget, rand: lockedRand(7)}
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		ctx := context.Background()
		var cancel context.CancelFunc = func() {}
		if deadline > 0 {
			ctx, cancel = context.WithTimeout(ctx, deadline)
		}
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://dep.test/%d", i), nil)
		resp, err := tr.RoundTrip(req)
		longest = max(longest, time.Since(start))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && Attempts(resp) == failures+1 {
				served++
			}
		}
		cancel()
	}
	return served, longest
}

// TestAloneGetsSpacedOut: 200 GETs, each failing 3 times (503 or reset)
// then served, 10 s apart through one default Transport (so each is alone:
// no failure of another in the 10 s before it): each is served in its 4
// attempts, within its backoff schedule, with a 2 s deadline and without
// one.
func TestAloneGetsSpacedOut(t *testing.T) {
	for _, deadline := range []time.Duration{2 * time.Second, 0} {
		t.Run(fmt.Sprintf("deadline %v", deadline), func(t *testing.T) {
			var figs [2]struct {
				served  int
				longest time.Duration
			}
			for i, b := range []*Budget{nil, UnlimitedBudget()} {
				synctest.Test(t, func(t *testing.T) {
					figs[i].served, figs[i].longest = loneGets(t, b, 200, 3, 10*time.Second, deadline)
				})
			}
			t.Logf("default: %d/200 served in 4 attempts, slowest %v; UnlimitedBudget: %d/200, slowest %v",
				figs[0].served, figs[0].longest, figs[1].served, figs[1].longest)
			assert.Equal(t, 200, figs[0].served)
			assert.Equal(t, figs[1], figs[0], "the default budget as UnlimitedBudget")
			assert.LessOrEqual(t, figs[0].longest, 700*time.Millisecond, "within the default schedule")
		})
	}
}

// TestSparseFailuresAreRetriedAtTheirBackoff: 1 request a second for
// 5 minutes, 10 % of first attempts failing once (as a 503, and as a
// reset), 2 s deadlines: every request is served, and a retried one is no
// later than its backoff makes it (at most 100 ms with the default
// policy): the same end as with UnlimitedBudget().
func TestSparseFailuresAreRetriedAtTheirBackoff(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprintf("reset %v", reset), func(t *testing.T) {
			var outs [2][]faultResult
			for i, b := range []*Budget{nil, UnlimitedBudget()} {
				synctest.Test(t, func(t *testing.T) {
					dep := newFaultServer(10*time.Millisecond, func(a faultAttempt) (int, http.Header, error) {
						if a.n == 1 && a.draw(0) < 0.1 {
							if reset {
								return 0, nil, testutil.ErrReset()
							}
							return http.StatusServiceUnavailable, nil, nil
						}
						return http.StatusOK, nil, nil
					})
					calls := faultEvery("dep.test", 1, 5*time.Minute, 0)
					for j := range calls {
						calls[j].deadline = 2 * time.Second
					}
					outs[i] = faultSend(&Transport{Base: dep, Budget: b, rand: lockedRand(11)}, calls)
				})
			}
			served, retried, late := 0, 0, time.Duration(0)
			for j, r := range outs[0] {
				if r.served() {
					served++
				}
				took := r.end - r.at
				if took > 10*time.Millisecond {
					retried++
					late = max(late, took-20*time.Millisecond) // less the two attempts' 10 ms
				}
				assert.Equal(t, outs[1][j].end, r.end, "call %d ends as with UnlimitedBudget", j)
			}
			t.Logf("default: %d/%d served, %d retried, latest retry %v after its failure", served, len(outs[0]), retried, late)
			assert.Equal(t, len(outs[0]), served)
			assert.Positive(t, retried)
			assert.LessOrEqual(t, late, 100*time.Millisecond, "no later than the default backoff")
		})
	}
}

// sequentialWorker sends one GET at a time through tr, without deadline,
// until d has passed, and returns the calls, their attempts, the longest
// call and the reasons its give-ups gave.
func sequentialWorker(tr *Transport, d time.Duration) (calls, attempts int, longest time.Duration, reasons map[Reason]int) {
	reasons = map[Reason]int{}
	begin := time.Now()
	for time.Since(begin) < d {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, "http://dep.test/", nil)
		resp, err := tr.RoundTrip(req)
		longest = max(longest, time.Since(start))
		calls++
		var e *Error
		switch {
		case errors.As(err, &e):
			attempts += e.Attempts
			reasons[e.Reason]++
		case err == nil:
			attempts += Attempts(resp)
			resp.Body.Close()
		}
	}
	return calls, attempts, longest, reasons
}

// TestSequentialWorkerFailsFastInAnOutage: one request at a time, no
// deadline, through 10 minutes of resets (an answer takes 50 ms): at most
// 1.30 attempts per request, no request longer than its policy's schedule
// (700 ms of waits plus its 4 attempts), and a retry the credit does not
// pay for, with nothing else in flight to the host, refused at once with
// ReasonBudget.
func TestSequentialWorkerFailsFastInAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newFaultServer(50*time.Millisecond, func(faultAttempt) (int, http.Header, error) {
			return 0, nil, testutil.ErrReset()
		})
		tr := &Transport{Base: dep, rand: lockedRand(5)}
		calls, attempts, longest, reasons := sequentialWorker(tr, 10*time.Minute)
		perCall := float64(attempts) / float64(calls)
		t.Logf("sequential worker, 10 min of resets: %d calls, %.3f attempts per call, longest %v, give-ups %v",
			calls, perCall, longest, reasons)
		assert.LessOrEqual(t, perCall, 1.30)
		assert.LessOrEqual(t, longest, 700*time.Millisecond+4*50*time.Millisecond)
		assert.Positive(t, reasons[ReasonBudget], "refused at once")
	})
}

// TestSizedBudgetFollowsGRFCA6: with NewBudget(0.1, 1), gRFC A6's sequence:
// a first failure is retried once; after 10 successes, one retry; then
// none.
func TestSizedBudgetFollowsGRFCA6(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		var mu sync.Mutex
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		tr := &Transport{Base: base, Budget: NewBudget(0.1, 1), Policy: Policy{Backoff: Constant(0)}}
		send := func(failing bool) int {
			mu.Lock()
			fail = failing
			mu.Unlock()
			before := base.Attempts()
			resp, err := testutil.RoundTrip(t, tr, testutil.Get(t, context.Background()))
			if err == nil {
				resp.Body.Close()
			}
			return base.Attempts() - before
		}
		got := []int{send(true)}
		for range 10 {
			require.Equal(t, 1, send(false))
		}
		got = append(got, send(true), send(true))
		t.Logf("NewBudget(0.1, 1): a failure, 10 successes, two failures: %v attempts", got)
		assert.Equal(t, []int{2, 2, 1}, got)
	})
}

// TestSharedSizedBudgetBoundsADeadHost: two Transports sharing
// NewBudget(0.1, 10) send 2,000 GETs one at a time to a dead host: at most
// 1.12 attempts per request.
func TestSharedSizedBudgetBoundsADeadHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dep := newFaultServer(time.Millisecond, func(faultAttempt) (int, http.Header, error) {
			return http.StatusServiceUnavailable, nil, nil
		})
		b := NewBudget(0.1, 10)
		trs := []*Transport{{Base: dep, Budget: b, rand: lockedRand(1)}, {Base: dep, Budget: b, rand: lockedRand(2)}}
		for i := range 2000 {
			req, _ := http.NewRequest(http.MethodGet, "http://dep.test/", nil)
			resp, err := trs[i%2].RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}
		perCall := float64(dep.attempts("")) / 2000
		t.Logf("two Transports sharing NewBudget(0.1, 10), 2,000 GETs to a dead host: %.3f attempts per request", perCall)
		assert.LessOrEqual(t, perCall, 1.12)
	})
}
