package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/clock"
)

// A fleet is the other shape the program runs (-fleet): many clients, each
// its own retryhttp.Transport with the default budget, each sending a
// steady rate of GETs, phases spread evenly, into an outage. It runs on
// the virtual clock, and with -real also as that many OS processes against
// one loopback server, so the simulation can be held against a real fleet.
type fleet struct {
	Clients int
	Rate    int           // requests a second, per client
	Before  time.Duration // up, before the outage
	Outage  time.Duration // down: 503 to every attempt
	After   time.Duration // up again
}

// theFleet is the fleet the program runs: clients at 12 requests a second
// through a 10 s outage.
func theFleet(clients int) fleet {
	return fleet{Clients: clients, Rate: 12, Before: 5 * time.Second, Outage: 10 * time.Second, After: 2 * time.Second}
}

// span returns how long the fleet sends.
func (f fleet) span() time.Duration { return f.Before + f.Outage + f.After }

// sendsAt returns when client i sends its requests, since the fleet began:
// every 1/Rate, the clients' phases spread over the first 1/Rate.
func (f fleet) sendsAt(i int) []time.Duration {
	gap := time.Second / time.Duration(f.Rate)
	var at []time.Duration
	for t := time.Duration(i) * gap / time.Duration(f.Clients); t < f.span(); t += gap {
		at = append(at, t)
	}
	return at
}

// down reports whether the dependency is down at t since the fleet began.
func (f fleet) down(t time.Duration) bool { return t >= f.Before && t < f.Before+f.Outage }

// fleetFigures are the two figures a fleet is judged by.
type fleetFigures struct {
	Requests int // started while the dependency was down
	Attempts int // the attempts of those requests, all told
	Peak     int // the most arrivals in 100 ms, in the first 2 s of the outage
	Offered  int // the first attempts offered in 100 ms
}

// PerRequest returns the attempts per request started in the outage.
func (f fleetFigures) PerRequest() float64 { return float64(f.Attempts) / float64(f.Requests) }

// arrivals records when each request's attempts reached the dependency,
// by the request's id (its client and number), since the fleet began.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Duration
}

func (a *arrivals) add(id string, t time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = make(map[string][]time.Duration)
	}
	a.at[id] = append(a.at[id], t)
}

// figures returns the fleet's figures from the arrivals: a request is
// counted as started when its first attempt arrived.
func (a *arrivals) figures(f fleet) fleetFigures {
	a.mu.Lock()
	defer a.mu.Unlock()
	fig := fleetFigures{Offered: f.Clients * f.Rate / 10}
	var all []time.Duration
	for _, ts := range a.at {
		all = append(all, ts...)
		if f.down(ts[0]) {
			fig.Requests++
			fig.Attempts += len(ts)
		}
	}
	slices.Sort(all)
	for i, t := range all {
		if t < f.Before || t >= f.Before+2*time.Second {
			continue
		}
		j, _ := slices.BinarySearch(all, t+100*time.Millisecond)
		fig.Peak = max(fig.Peak, j-i)
	}
	return fig
}

// requestID names request k of client i in the header fleetHeader, which
// every attempt of it carries.
func requestID(i, k int) string { return strconv.Itoa(i) + "-" + strconv.Itoa(k) }

const fleetHeader = "X-Fleet-Request"

// simulateFleet runs fleet f on the virtual clock, its Transports drawing
// from one source seeded with seed, and returns its figures.
func simulateFleet(f fleet, seed uint64) fleetFigures {
	v := clock.NewVirtual(origin)
	b := base{clk: v, start: origin, rand: newRand(seed).Float64}
	var a arrivals
	dep := roundTripper(func(req *http.Request) (*http.Response, error) {
		t := b.since()
		a.add(req.Header.Get(fleetHeader), t)
		code := http.StatusOK
		if f.down(t) {
			code = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
	for i := range f.Clients {
		tr := &retryhttp.Transport{Base: fleetBase{b, dep}}
		for k, at := range f.sendsAt(i) {
			v.At(origin.Add(at), func() { fleetGet(tr, "http://dependency.test/", requestID(i, k)) })
		}
	}
	v.Run()
	return a.figures(f)
}

// fleetBase is a fleet client's base on the virtual clock: the dependency,
// and the run's clock and random source (clock.Source).
type fleetBase struct {
	base
	dep http.RoundTripper
}

func (b fleetBase) RoundTrip(req *http.Request) (*http.Response, error) { return b.dep.RoundTrip(req) }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fleetGet sends one request of a fleet through rt and drains its answer.
func fleetGet(rt http.RoundTripper, url, id string) {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	req.Header.Set(fleetHeader, id)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// runRealFleet runs fleet f as OS processes, each one client: the program
// itself, started again as a child (-fleet-child), against a loopback
// server that is down for the outage; exe is the program's path. It
// returns the figures the server saw.
func runRealFleet(f fleet, exe string) (fleetFigures, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fleetFigures{}, err
	}
	var a arrivals
	start := time.Now().Add(2 * time.Second) // the children's time to start
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.Since(start)
		a.add(r.Header.Get(fleetHeader), t)
		if f.down(t) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	var wg sync.WaitGroup
	errs := make([]error, f.Clients)
	for i := range f.Clients {
		cmd := exec.Command(exe, "-fleet-child", strconv.Itoa(i), "-fleet", strconv.Itoa(f.Clients),
			"-fleet-url", url, "-fleet-start", strconv.FormatInt(start.UnixNano(), 10))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return fleetFigures{}, err
		}
		wg.Go(func() { errs[i] = cmd.Wait() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fleetFigures{}, err
		}
	}
	return a.figures(f), nil
}

// fleetChild is a child process of runRealFleet: client i of fleet f,
// sending to url from start on, through a Transport of its own.
func fleetChild(f fleet, i int, url string, start time.Time) {
	tr := &retryhttp.Transport{}
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for k, at := range f.sendsAt(i) {
		time.Sleep(time.Until(start.Add(at)))
		wg.Go(func() { fleetGet(tr, url, requestID(i, k)) })
	}
	wg.Wait()
}

// fleetRun is a fleet's figures over several runs: their medians, with
// the smallest and largest.
type fleetRun struct {
	Runs             int
	PerRequest, Peak float64 // medians
	PerRequestRange  [2]float64
	PeakRange        [2]int
	Offered          int
	perRequests      []float64
	peaks            []float64
}

// add adds one run's figures.
func (r *fleetRun) add(fig fleetFigures) {
	r.Runs++
	r.Offered = fig.Offered
	r.perRequests = append(r.perRequests, fig.PerRequest())
	r.peaks = append(r.peaks, float64(fig.Peak))
	r.PerRequest, r.PerRequestRange = medianRange(r.perRequests)
	peak, rng := medianRange(r.peaks)
	r.Peak, r.PeakRange = peak, [2]int{int(rng[0]), int(rng[1])}
}

// medianRange returns the median of xs and their smallest and largest.
func medianRange(xs []float64) (float64, [2]float64) {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return m, [2]float64{s[0], s[n-1]}
}

// within reports whether got is within a tenth of want.
func within(got, want float64) bool { return got >= 0.9*want && got <= 1.1*want }

// writeFleet writes the fleet's simulated figures, and the real ones if
// real ran.
func writeFleet(w io.Writer, f fleet, sim, real *fleetRun) {
	fmt.Fprintf(w, "%d clients, each its own Transport with the default budget, %d GETs a second each, phases\n",
		f.Clients, f.Rate)
	fmt.Fprintf(w, "spread evenly; the dependency answers 200, then 503 for %v from %v, then 200 for %v.\n",
		f.Outage, f.Before, f.After)
	fmt.Fprintf(w, "Medians, with the smallest and largest, of %d simulated runs (seeds 1 to %d)", sim.Runs, sim.Runs)
	if real != nil {
		fmt.Fprintf(w, " and of %d runs\nof %d OS processes against a loopback server", real.Runs, f.Clients)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintln(w)
	row := func(label string, s, r string, ok string) {
		fmt.Fprintf(w, "%-44s  %-20s  %-20s  %s\n", label, s, r, ok)
	}
	realCol := func(v string) string {
		if real == nil {
			return "-"
		}
		return v
	}
	row("", "simulated", realCol("real"), realCol("within 10 %"))
	perReq := func(r *fleetRun) string {
		return fmt.Sprintf("%.3f (%.3f-%.3f)", r.PerRequest, r.PerRequestRange[0], r.PerRequestRange[1])
	}
	peak := func(r *fleetRun) string { return fmt.Sprintf("%.0f (%d-%d)", r.Peak, r.PeakRange[0], r.PeakRange[1]) }
	yes := func(ok bool) string { return map[bool]string{true: "yes", false: "no"}[ok] }
	var rp, rk, okp, okk string
	if real != nil {
		rp, rk = perReq(real), peak(real)
		okp, okk = yes(within(real.PerRequest, sim.PerRequest)), yes(within(real.Peak, sim.Peak))
	}
	row("attempts per request started in the outage", perReq(sim), realCol(rp), realCol(okp))
	row(fmt.Sprintf("busiest 100 ms at its onset (%d offered)", sim.Offered), peak(sim), realCol(rk), realCol(okk))
}
