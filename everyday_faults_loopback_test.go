package retryhttp

// Two everyday faults on real loopback, in real time, for the default
// Transport and, beside it, the same Transport with UnlimitedBudget()
// (everyday_faults_test.go has the others, in fake time). Print their
// tables with:
//
//	go test -run TestLoopback -v .
//
//   - A backend restarted behind a reverse proxy: a backend that keeps a
//     ledger of POSTs by Idempotency-Key, behind httputil.ReverseProxy, is
//     closed abruptly (http.Server.Close: its listener and every
//     connection) at 600 ms, while a POST is being applied (its answer is
//     lost: the proxy answers 502), and listens again on the same address
//     300 ms later. Meanwhile the proxy's dials are refused and it answers
//     502. The load is a GET every 2 ms and a POST every 5 ms for 1.5 s,
//     with the Transport's own idempotency keys.
//   - HTTP/2 connection closes: net/http's HTTP/2 server over TLS, answering
//     in 50 ms, resets every connection it has (a TCP RST: no TLS
//     close_notify, no GOAWAY, as when a server process dies or a load
//     balancer drops its connections) five times, 60 ms apart, under 200
//     concurrent GETs. Streams in flight fail with what net/http makes of
//     it: "connection reset by peer" on read or write, or "client
//     connection force closed".
//
// What is asserted, as in everyday_faults_test.go: nothing applied twice;
// for UnlimitedBudget a floor a little under what it does; for the default
// Transport its target. The machine may be shared and slow: the floors are
// judged only when the scheduler's lag stayed low. Each test takes 2 to
// 4 s. The faults themselves, which the chaos module runs through the
// peers too, are in internal/testutil (faults.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// loopDeadline is each call's context deadline.
const loopDeadline = 5 * time.Second

// loopFigures is what one loopback scenario measured through one
// Transport.
type loopFigures struct {
	gets, getsServed   int
	posts, postsServed int
	twice              int           // POSTs the backend applied more than once
	unkeyed            int           // POSTs that reached the backend without a key
	repeats            int           // POSTs that reached the backend with a key seen before
	attempts           uint64        // Stats.Attempts
	denied             uint64        // Stats.BudgetRefusals
	lag                time.Duration // the scheduler's worst lag during the run (testutil.LagProbe)

	mu       sync.Mutex
	failures map[string]int // why the calls that were not served failed
}

func (f *loopFigures) getShare() float64  { return float64(f.getsServed) / float64(f.gets) }
func (f *loopFigures) postShare() float64 { return float64(f.postsServed) / float64(f.posts) }

// perCall is the attempts per call.
func (f *loopFigures) perCall() float64 { return float64(f.attempts) / float64(f.gets+f.posts) }

// fail records why a call was not served.
func (f *loopFigures) fail(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = make(map[string]int)
	}
	f.failures[loopbackPort.ReplaceAllString(why, "127.0.0.1:*")]++
}

// why returns the failures, most frequent first.
func (f *loopFigures) why() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := slices.Collect(maps.Keys(f.failures))
	slices.SortFunc(keys, func(a, b string) int { return f.failures[b] - f.failures[a] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", f.failures[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// loopTransport returns the default Transport over base with policy p, or
// the same with UnlimitedBudget(), recording in f why it gives up on
// requests.
func loopTransport(base http.RoundTripper, p Policy, unlimited bool, f *loopFigures) *Transport {
	tr := &Transport{Base: base, Policy: p}
	if unlimited {
		tr.Budget = UnlimitedBudget()
	}
	tr.OnGiveUp = func(e *GiveUpEvent) {
		var last any
		var re *Error
		if errors.As(e.Err, &re) {
			last = re.Err
		} else if e.Response != nil {
			last = e.Response.StatusCode
		}
		f.fail(fmt.Sprintf("%s after %d: %v", e.Reason, e.Attempts, last))
	}
	return tr
}

// loopLagLimit is the scheduler lag (testutil.LagProbe) over which a run's
// serving figures are not held to their floors: on a machine that busy,
// they are the machine's as much as the Transport's. On a loaded machine,
// with -race, the backend restart served 17 to 64 % of its calls even with
// UnlimitedBudget, at 0.7 to 1.6 s of lag.
const loopLagLimit = 100 * time.Millisecond

// loopOnTime reports whether the run through who, whose figures are f,
// kept to its schedule (the scheduler lagged at most loopLagLimit), and
// logs it if not.
func loopOnTime(t *testing.T, who string, f *loopFigures) bool {
	if f.lag <= loopLagLimit {
		return true
	}
	t.Logf("%s's floors are not asserted: the scheduler lagged %v (over %v)", who, f.lag.Round(time.Millisecond), loopLagLimit)
	return false
}

// loopCall sends req through rt within loopDeadline, reads and closes the
// response body, and reports whether it was served (a 200 read whole).
// The Transport's OnGiveUp records why a call failed; loopCall records a
// body cut short.
func loopCall(rt http.RoundTripper, req *http.Request, f *loopFigures) bool {
	ctx, cancel := context.WithTimeout(context.Background(), loopDeadline)
	defer cancel()
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		f.fail(fmt.Sprintf("%d, then its body: %v", resp.StatusCode, err))
	}
	return err == nil && resp.StatusCode == http.StatusOK
}

// loopProxyRestart runs the backend restart once through the default
// Transport (or with UnlimitedBudget), with its own idempotency keys
// (testutil.RunProxyRestart).
func loopProxyRestart(t *testing.T, unlimited bool) *loopFigures {
	f := new(loopFigures)
	var tr *Transport
	var gServed, pServed atomic.Int64
	run := testutil.RunProxyRestart(t, func(base *http.Transport) testutil.Send {
		tr = loopTransport(base, Policy{IdempotencyKeys: &IdempotencyKeys{}}, unlimited, f)
		return func(_ int, req *http.Request) {
			switch {
			case !loopCall(tr, req, f):
			case req.Method == http.MethodGet:
				gServed.Add(1)
			default:
				pServed.Add(1)
			}
		}
	})
	f.gets, f.posts, f.lag = run.GETs, run.POSTs, run.Lag
	f.getsServed, f.postsServed = int(gServed.Load()), int(pServed.Load())
	f.twice, f.unkeyed, f.repeats = run.Ledger.Twice, run.Ledger.Unkeyed, run.Ledger.Repeats
	st := tr.Stats()
	f.attempts, f.denied = st.Attempts, st.BudgetRefusals
	return f
}

// The backend restart's target and floors. The target: at least 98 % of
// GETs and of POSTs served, none applied twice. UnlimitedBudget does not
// always meet it (95 to 100 %): a call that starts in the outage fails if
// its three backoffs (full jitter, [0, 100 ms), [0, 200 ms), [0, 400 ms))
// all end before the backend is back, so its floor is under what it does.
// The default Transport meets it (100 % in the runs measured, at about
// 1.2 attempts per call): after the first 502 the retries wait in line for
// news of the backend, probing it, and its first success lets them go.
const (
	restartTarget = 0.98

	restartUnlimitedFloor = 0.93 // UnlimitedBudget: 95 to 100 %, -race or not
)

// TestLoopbackProxyRestart runs the backend restart on loopback: a backend
// restarted behind httputil.ReverseProxy (down 300 ms) under a GET every
// 2 ms and a keyed POST every 5 ms.
func TestLoopbackProxyRestart(t *testing.T) {
	def := loopProxyRestart(t, false)
	unl := loopProxyRestart(t, true)
	rows := []string{fmt.Sprintf("%-18s | %-14s | %-14s | %5s | %5s | %s",
		"", "GETs served", "POSTs served", "twice", "att/c", "denied, keys repeated, lag")}
	for _, r := range []struct {
		name string
		f    *loopFigures
	}{{"default Transport", def}, {"UnlimitedBudget()", unl}} {
		rows = append(rows, fmt.Sprintf("%-18s | %3d/%3d %5.1f%% | %3d/%3d %5.1f%% | %5d | %5.2f | %d, %d, %v",
			r.name, r.f.getsServed, r.f.gets, 100*r.f.getShare(), r.f.postsServed, r.f.posts, 100*r.f.postShare(),
			r.f.twice, r.f.perCall(), r.f.denied, r.f.repeats, r.f.lag.Round(time.Millisecond)))
	}
	t.Logf("a backend restarted behind httputil.ReverseProxy (down 300 ms), real time (race %v):\n%s\nnot served, default: %s\nnot served, UnlimitedBudget: %s",
		testutil.RaceEnabled, strings.Join(rows, "\n"), def.why(), unl.why())

	for _, f := range []*loopFigures{def, unl} {
		assert.Zero(t, f.twice, "no POST applied twice")
		assert.Zero(t, f.unkeyed, "every POST carries the Transport's key")
	}
	if loopOnTime(t, "UnlimitedBudget", unl) {
		assert.GreaterOrEqual(t, unl.getShare(), restartUnlimitedFloor, "UnlimitedBudget: GETs served")
		assert.GreaterOrEqual(t, unl.postShare(), restartUnlimitedFloor, "UnlimitedBudget: POSTs served")
	}
	if loopOnTime(t, "the default Transport", def) {
		faultTarget(t, "GETs served", def.getShare(), restartTarget)
		faultTarget(t, "POSTs served", def.postShare(), restartTarget)
	}
}

// ---- an HTTP/2 server closing its connections ----

// loopH2Closes runs the HTTP/2 closes once through the default Transport
// (or with UnlimitedBudget) (testutil.RunH2Closes).
func loopH2Closes(t *testing.T, unlimited bool) *loopFigures {
	f := new(loopFigures)
	var tr *Transport
	var served atomic.Int64
	run := testutil.RunH2Closes(t, func(base *http.Transport) testutil.Send {
		tr = loopTransport(base, Policy{}, unlimited, f)
		return func(_ int, req *http.Request) {
			if loopCall(tr, req, f) {
				served.Add(1)
			}
		}
	})
	f.gets, f.getsServed, f.lag = testutil.H2ClosesGETs, int(served.Load()), run.Lag
	st := tr.Stats()
	f.attempts, f.denied = st.Attempts, st.BudgetRefusals
	return f
}

// The HTTP/2 closes' floors. The target was at least 196 of the 200 GETs
// served. UnlimitedBudget does not meet it (176 to 200): an attempt takes
// 50 ms and the closes come 60 ms apart, so an attempt made while they
// last survives only if it starts just after one, and a call fails if its
// fourth attempt starts before the last close. The default Transport
// served 200 of 200 when its line held the retries until their deadlines:
// the first close fails all 200 at once, their retries wait in line for
// news, a probe goes at backoff pace, and the first success after the last
// close lets them go. Held now only while their schedule lasts (0.7 s of
// waits from 25 ms), they are served if the probe that finds the host back
// (100 ms after the last close) and the releases its success and those
// after it pay for reach them in time, or if the host answered last when
// their schedules end: 200 of 200 in the runs measured, at 2.0 attempts
// per call. The floor is the
// UnlimitedBudget's. With -race UnlimitedBudget served anywhere from
// 100 to 200, at no more scheduler lag than without: the race detector
// slows the client's TLS and HTTP/2 work enough to change which attempts
// the closes cut. The floors are not asserted then.
const (
	h2CloseDefaultFloor   = 180 // the default Transport: 189 to 200
	h2CloseUnlimitedFloor = 165 // UnlimitedBudget: 176 to 200
)

// TestLoopbackHTTP2Closes runs the HTTP/2 closes on loopback: an HTTP/2
// server resetting its connections 5 times, 60 ms apart, under 200
// concurrent GETs that it answers in 50 ms.
func TestLoopbackHTTP2Closes(t *testing.T) {
	def := loopH2Closes(t, false)
	unl := loopH2Closes(t, true)
	t.Logf("an HTTP/2 server resetting its connections 5 times, 60 ms apart, real time (race %v):\n"+
		"%-18s | %-14s | %5s | %s\n%-18s | %3d/%3d %5.1f%% | %5.2f | %d, %v\n%-18s | %3d/%3d %5.1f%% | %5.2f | %d, %v\n"+
		"not served, default: %s\nnot served, UnlimitedBudget: %s", testutil.RaceEnabled,
		"", "served", "att/c", "denied, lag",
		"default Transport", def.getsServed, def.gets, 100*def.getShare(), def.perCall(), def.denied, def.lag.Round(time.Millisecond),
		"UnlimitedBudget()", unl.getsServed, unl.gets, 100*unl.getShare(), unl.perCall(), unl.denied, unl.lag.Round(time.Millisecond),
		def.why(), unl.why())
	if testutil.RaceEnabled {
		t.Log("the floors are not asserted with -race: its slower TLS and HTTP/2 work change which attempts the closes cut")
		return
	}
	if loopOnTime(t, "UnlimitedBudget", unl) {
		assert.GreaterOrEqual(t, unl.getsServed, h2CloseUnlimitedFloor, "UnlimitedBudget: GETs served of 200")
	}
	if loopOnTime(t, "the default Transport", def) {
		assert.GreaterOrEqual(t, def.getsServed, h2CloseDefaultFloor, "the default Transport: GETs served of 200")
	}
}
