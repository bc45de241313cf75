// Command overload shows what retryhttp does to keep retries from making
// an overload worse, on servers of its own on the loopback interface:
//
//  1. A chain of three services, each calling the next through retryhttp,
//     the last one down: how many requests reach the last per request to
//     the first (with a 2 s deadline), with and without AdviceHandler on
//     the services, with the default retry budget and with none.
//  2. A dependency that serves 100 requests a second and answers 503
//     beyond, offered 300 a second by one client, then 80 a second: what it
//     receives per request it accepts, the goodput, the requests rejected in
//     the client, and how the client fares once the load is back within
//     capacity, without and with adaptive throttling (Policy.Throttle).
//  3. An SDK's retry loop (3 tries with one Idempotency-Key on 429, as
//     stripe-go does) over one retryhttp Transport, and over a Transport
//     made for each try: attempts at the server per charge.
//
// Run it with
//
//	go run ./examples/overload
//	go run ./examples/overload -scale 1   # the overload in real time: 80 s
//
// The scenarios run side by side and take about 9 s: the overload of the
// second runs 10 times faster than it would (6 s stand for 60 s, and the
// throttle's window is scaled with it), which -scale changes. The first
// and third use retryhttp's defaults.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	cfg := config{}
	flag.Float64Var(&cfg.Scale, "scale", 10, "how many times faster than real time the overload scenario runs (1 to 60)")
	flag.Parse()
	if _, err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(2)
	}
}

// config is what a run may change.
type config struct {
	// Backoff is the Policy.Backoff of the chain's services and of the
	// SDK's Transports. Nil means the default (full jitter, 100 ms to 10 s).
	Backoff retryhttp.Backoff

	// Scale is how many times faster than real time the overload scenario
	// runs: its 60 s at 300/s, 20 s at 80/s and the throttle's window are
	// divided by Scale. It must be within 1 to 60.
	Scale float64

	// net is where the servers listen and the clients dial; nil means
	// loopback. The tests run the scenarios on an in-memory network, in
	// fake time (testing/synctest), where the load keeps to its schedule.
	net network
}

// A network makes servers and connects clients to them.
type network interface {
	NewServer(http.Handler) *httptest.Server
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// newServer starts a server serving h on the run's network.
func (c config) newServer(h http.Handler) *httptest.Server {
	if c.net == nil {
		return httptest.NewServer(h)
	}
	return c.net.NewServer(h)
}

// newBase returns a transport with a connection pool of its own, deep
// enough for the overload's concurrent calls, on the run's network.
func (c config) newBase() *http.Transport {
	t := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	if c.net != nil {
		t.DialContext = c.net.DialContext
	}
	return t
}

// A report holds every row the run printed, in order.
type report struct {
	Chain    []chainRow
	Overload []overloadRow
	SDK      []sdkRow
}

// newReport returns the rows a run fills in: the variants of each
// scenario.
func newReport() *report {
	return &report{
		Chain: []chainRow{
			{Unlimited: true}, {}, {Verdict: true}, {Verdict: true, Unlimited: true},
		},
		Overload: []overloadRow{{}, {Throttle: true}},
		SDK:      []sdkRow{{Shared: true}, {}},
	}
}

// run runs the three scenarios side by side, prints their tables to w and
// returns their rows.
func run(w io.Writer, cfg config) (*report, error) {
	if !(cfg.Scale >= 1 && cfg.Scale <= 60) {
		return nil, fmt.Errorf("-scale %v: want 1 to 60", cfg.Scale)
	}
	r := newReport()
	overload := time.Duration(float64(hotFor+coolFor) / cfg.Scale) // the longest scenario
	fmt.Fprintf(w, "retryhttp under overload: three scenarios on loopback servers, run side by side (%v).\n",
		(overload + time.Second).Round(time.Second))

	var wg sync.WaitGroup
	for i := range r.Chain {
		wg.Go(func() { runChain(&r.Chain[i], cfg) })
	}
	for i := range r.Overload {
		wg.Go(func() { runOverload(&r.Overload[i], cfg) })
	}
	for i := range r.SDK {
		wg.Go(func() { runSDK(&r.SDK[i], cfg) })
	}
	wg.Wait()

	printChain(w, r.Chain, cfg.Backoff)
	printOverload(w, r.Overload, cfg.Scale)
	printSDK(w, r.SDK, cfg.Backoff)
	return r, nil
}

// backoffNote says so when the run's backoff is not the default.
func backoffNote(w io.Writer, b retryhttp.Backoff) {
	if b == nil {
		return
	}
	desc := fmt.Sprintf("%+v", b)
	if c, ok := b.(retryhttp.Constant); ok {
		desc = "a constant " + time.Duration(c).String()
	}
	fmt.Fprintf(w, "   (backoff shortened to %s for this run; the default is full jitter, 100 ms to 10 s)\n", desc)
}

func printChain(w io.Writer, rows []chainRow, backoff retryhttp.Backoff) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "1. One request to the first of three services, each calling the next via retryhttp; the last is down")
	backoffNote(w, backoff)
	t := table{head: []string{"services", "budget", "at the last", "client got", "X-Should-Retry", "took"}}
	for _, r := range rows {
		services, budget := "plain handlers", "default"
		if r.Verdict {
			services = "AdviceHandler"
		}
		if r.Unlimited {
			budget = "unlimited"
		}
		got, verdict := fmt.Sprint(r.Status), r.ShouldRetry
		if r.Err != nil {
			got = "error"
		}
		if verdict == "" {
			verdict = "-"
		}
		t.add(services, budget, fmt.Sprint(r.AtLast), got, verdict, r.Took.Round(10*time.Millisecond).String())
	}
	t.write(w)
	fmt.Fprintln(w, "Lesson: without a budget retries multiply across layers (4 x 4). The default budget bounds")
	fmt.Fprintln(w, "them by its credit: each call of the middle service is alone, and gets its retries until the")
	fmt.Fprintln(w, "credit (10 retries) is spent; later calls are refused at once. AdviceHandler keeps retries")
	fmt.Fprintln(w, "at one layer: a 5xx after a call gave up says X-Should-Retry: false, and the retryhttp")
	fmt.Fprintln(w, "clients above do not retry it.")
}

func printOverload(w io.Writer, rows []overloadRow, scale float64) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "2. One client offers 300 req/s to a dependency that serves 100/s (503 beyond), then 80 req/s")
	hot := time.Duration(float64(hotFor) / scale)
	cool := time.Duration(float64(coolFor) / scale)
	window := time.Duration(float64(throttleWindow) / scale)
	if scale != 1 {
		fmt.Fprintf(w, "   (time runs %vx fast: %s at 300/s stand for %s, %s at 80/s for %s; throttling is\n",
			scale, secs(hot), secs(hotFor), secs(cool), secs(coolFor))
		fmt.Fprintf(w, "   Policy{Throttle: &Throttle{Window: %s}}, the default 10s window scaled alike)\n", window.Round(time.Millisecond))
	}
	t := table{head: []string{"policy", "received", "accepted", "ratio", "goodput", "rejected in client",
		"80/s: 1st window", "later"}}
	for _, r := range rows {
		name := "no throttling"
		if r.Throttle {
			name = "throttling"
		}
		t.add(name, fmt.Sprint(r.Received), fmt.Sprint(r.Accepted), fmt.Sprintf("%.2fx", r.Ratio()),
			fmt.Sprintf("%.1f/s", r.Goodput()), fmt.Sprintf("%d of %d", r.Rejected, r.Offered),
			percent(r.EarlyOK, r.EarlyCalls), percent(r.LateOK, r.LateCalls))
	}
	t.write(w)
	for _, r := range rows {
		if r.Stalled() {
			fmt.Fprintf(w, "   (the machine held the load up for %v at once, which may skew these figures)\n",
				r.Lag.Round(time.Millisecond))
			break
		}
	}
	fmt.Fprintln(w, "Lesson: the budget bounds retries, but not first attempts; throttling rejects in the client")
	fmt.Fprintln(w, "what the host would refuse, so it gets ~2x what it accepts instead of 3x at the same goodput,")
	fmt.Fprintln(w, "at the cost of some refusals for a window once the load drops: turn it on for a host that")
	fmt.Fprintln(w, "sheds load with 503/429 under steady traffic from many callers, not for one that is just down.")
}

func printSDK(w io.Writer, rows []sdkRow, backoff retryhttp.Backoff) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "3. An SDK tries %d times with one Idempotency-Key on 429 (as stripe-go), over retryhttp; %d charges\n",
		sdkTries, charges)
	backoffNote(w, backoff)
	t := table{head: []string{"under the SDK", "attempts per charge", "in all", "SDK retries recognised"}}
	for _, r := range rows {
		name := "a Transport per try"
		if r.Shared {
			name = "one shared Transport"
		}
		per := make([]string, len(r.PerCharge))
		for i, a := range r.PerCharge {
			per[i] = fmt.Sprint(a)
		}
		t.add(name, strings.Join(per, " "), fmt.Sprint(r.Attempts()), fmt.Sprint(r.RetriesFromAbove))
	}
	t.write(w)
	fmt.Fprintln(w, "Lesson: share one Transport under an SDK that retries: it knows the key's repeat and stands")
	fmt.Fprintln(w, "down, so the attempts add (at most 4+1+1) instead of multiplying (3 x 4).")
}

// secs formats d in seconds, to the millisecond.
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64) + "s"
}

func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// table is a text table: the first column aligned left, the others right.
type table struct {
	head []string
	rows [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range append([][]string{t.head}, t.rows...) {
		var b strings.Builder
		for i, c := range row {
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
