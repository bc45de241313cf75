package retryhttp

// The everyday faults' scenarios (everyday_faults_test.go) through the
// retry budgets that others ship (the anchors), beside retryhttp's default
// budget and its throttling, in fake time: the real attempt loop with
// UnlimitedBudget() and each anchor's budget as a Policy.Retryable that
// vetoes the retries it would refuse. Print the table with:
//
//	go test -run TestEverydayFaultsAnchors -faults.anchors -v .
//
// The anchors, as their documentation states them (per client, that is per
// Transport):
//   - Finagle's RetryBudget: retries in any 10 s may reach 20 % of the
//     requests deposited in it plus a reserve of 10 a second (100);
//   - Envoy's retry budget: active retries at most 20 % of active requests
//     (attempts in flight), and at least 3;
//   - gRPC's retry throttling: 10 tokens, each failure takes 1, each
//     success gives back 0.1, and retries go while more than 5 are left;
//   - the AWS SDK's retry quota (standard mode): 500 tokens, a retry costs
//     5 (10 after a timeout) and its success refunds them, and a success
//     at the first attempt gives back 1.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var faultsAnchors = flag.Bool("faults.anchors", false, "run TestEverydayFaultsAnchors: the everyday faults' scenarios through the anchors' budgets")

// anchor is one client's budget of another library.
type anchor struct {
	kind string
	mu   sync.Mutex

	deposits, withdrawals []time.Time // Finagle: in the last 10 s
	active, retries       int         // Envoy: attempts and retries in flight
	tokens                float64     // gRPC
	quota                 int         // AWS
}

var anchorKinds = []string{"finagle", "envoy", "grpc", "aws"}

func newAnchor(kind string) *anchor { return &anchor{kind: kind, tokens: 10, quota: 500} }

// transport returns a Transport over base whose retries a's budget allows.
func (a *anchor) transport(base http.RoundTripper) *Transport {
	if a.kind == "envoy" {
		base = &envoyBase{a: a, next: base}
	}
	return &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Retryable: a.retryable}}
}

// retryable sees every attempt's outcome and decides whether its retry
// goes, as the anchor's budget would.
func (a *anchor) retryable(at *Attempt) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if at.Number == 1 {
		a.deposits = append(a.deposits, now)
	}
	if !at.Retry {
		switch a.kind {
		case "grpc":
			a.tokens = min(10, a.tokens+0.1)
		case "aws":
			a.quota = min(500, a.quota+map[bool]int{true: 5, false: 1}[at.Number > 1])
		}
		return false
	}
	switch a.kind {
	case "finagle":
		cut := now.Add(-10 * time.Second)
		a.deposits = dropBefore(a.deposits, cut)
		a.withdrawals = dropBefore(a.withdrawals, cut)
		if 0.2*float64(len(a.deposits))+100-float64(len(a.withdrawals)) < 1 {
			return false
		}
		a.withdrawals = append(a.withdrawals, now)
	case "envoy":
		if a.retries >= max(3, a.active/5) {
			return false
		}
		a.retries++
	case "grpc":
		a.tokens = max(0, a.tokens-1)
		return a.tokens > 5
	case "aws":
		cost := 5
		if errors.Is(at.Err, context.DeadlineExceeded) {
			cost = 10
		}
		if a.quota < cost {
			return false
		}
		a.quota -= cost
	}
	return true
}

// dropBefore returns ts without the times before cut (ts is sorted).
func dropBefore(ts []time.Time, cut time.Time) []time.Time {
	i := 0
	for i < len(ts) && ts[i].Before(cut) {
		i++
	}
	return ts[i:]
}

// envoyBase counts the attempts in flight, and ends a retry's activity
// when its attempt returns.
type envoyBase struct {
	a    *anchor
	next http.RoundTripper
}

func (e *envoyBase) RoundTrip(req *http.Request) (*http.Response, error) {
	e.a.mu.Lock()
	e.a.active++
	e.a.mu.Unlock()
	resp, err := e.next.RoundTrip(req)
	e.a.mu.Lock()
	e.a.active--
	if AttemptNumber(req.Context()) > 1 {
		e.a.retries = max(e.a.retries-1, 0)
	}
	e.a.mu.Unlock()
	return resp, err
}

// TestEverydayFaultsAnchors runs every scenario of TestEverydayFaults
// through the default Transport, the same with Policy.Throttle on, and
// each anchor's budget, and prints served and attempts per request side by
// side. It asserts nothing of the anchors: their figures are reported.
func TestEverydayFaultsAnchors(t *testing.T) {
	if !*faultsAnchors {
		t.Skip("run with -faults.anchors")
	}
	variants := append([]string{"default", "throttle"}, anchorKinds...)
	var rows []string
	for i, sc := range faultScenarios(testing.Short()) {
		row := fmt.Sprintf("%-28s", sc.name)
		for _, v := range variants {
			var f faultFigures
			synctest.Test(t, func(t *testing.T) {
				f = sc.run(t, func(base http.RoundTripper) *Transport {
					var tr *Transport
					switch v {
					case "default":
						tr = &Transport{Base: base}
					case "throttle":
						tr = &Transport{Base: base, Policy: Policy{Throttle: &Throttle{}}}
					default:
						tr = newAnchor(v).transport(base)
					}
					tr.rand = lockedRand(uint64(100 + i))
					return tr
				})
			})
			row += fmt.Sprintf(" %5.1f%% %4.2f", 100*f.share(), f.perCall())
		}
		rows = append(rows, row)
	}
	head := fmt.Sprintf("%-28s", "scenario")
	for _, v := range variants {
		head += fmt.Sprintf(" %-11s", v)
	}
	t.Logf("served and attempts per request, fake time:\n%s\n%s", strings.TrimRight(head, " "), strings.Join(rows, "\n"))
}
