// Command herd shows what retries do to a dependency that blinked, with
// each of retryhttp's backoff strategies, with and without a retry budget.
//
//	go run ./internal/herd
//	go run ./internal/herd -svg herd.svg
//
// A thousand clients send one request each, spread uniformly over the first
// 10 ms, while the dependency is down for a second; every request fails, and
// every client retries. The dependency then comes back with a fixed
// capacity per 10 ms and answers 503 to whatever exceeds it, which the
// clients retry too. The program replays this for each backoff (exponential
// without jitter, full, equal and decorrelated jitter) twice: with no budget,
// and with retryhttp's Budget. There a retry goes at its backoff, paid by the
// budget's credit, unless other requests are in flight and another client
// failed since the dependency's last success: then, or when the credit is
// spent, it waits in line, oldest first. Each success of the dependency
// lets go as many as the credit then pays for, each spending a retry of it
// (a retry let go that succeeds gives its credit back and lets the next
// go); a silence of the head's own longest backoff lets it go as a probe;
// and when its request's schedule ends (the longest waits of the retries it
// has left) it goes if the dependency answered last, and is refused
// otherwise.
// So while the dependency is down, only the first client to fail retries at
// its backoff, and the line's probes reach the dependency. Each client is a
// real retryhttp.Transport, running its own attempt loop, Backoff and Budget on a virtual clock (deterministic for a
// seed, a run in under a second) with a seeded random source, and the
// program prints for each run a histogram of arrivals at the dependency
// over time and a summary table.
//
// The clients share one Transport, and so one budget, as the concurrent
// callers of one service do; -transports deals them over several.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// The default Budget's sizes, as retryhttp.NewBudget's doc gives them.
const (
	defaultCredit = 10   // retries of credit, at the start and at most
	defaultRatio  = 0.55 // retries earned per success
)

// The bounds of retryhttp's backoff strategies when theirs are zero.
const (
	defaultBase = 100 * time.Millisecond
	defaultCap  = 10 * time.Second
)

func main() {
	sc := scenario{}
	var base, cap time.Duration
	var svgPath string
	flag.IntVar(&sc.Clients, "clients", 1000, "clients, each sending one request")
	flag.DurationVar(&sc.Outage, "outage", time.Second, "how long the dependency is down, from t=0")
	flag.IntVar(&sc.Capacity, "capacity", 20, "requests the dependency serves per 10 ms once it is back; it fails the rest with 503")
	flag.DurationVar(&base, "base", defaultBase, "backoff base")
	flag.DurationVar(&cap, "cap", defaultCap, "backoff cap")
	flag.IntVar(&sc.MaxAttempts, "attempts", 8, "attempts per client, the first included (Policy.MaxAttempts)")
	flag.DurationVar(&sc.Spread, "spread", 10*time.Millisecond, "first requests are sent uniformly over [0, spread)")
	flag.IntVar(&sc.Transports, "transports", 1, "Transports the clients are dealt over, each with its own budget")
	flag.Uint64Var(&sc.Seed, "seed", 1, "random seed")
	flag.StringVar(&svgPath, "svg", "", "also write the histograms as an SVG chart to this file")
	var fl fleetFlags
	flag.IntVar(&fl.clients, "fleet", 0, "instead of the herd, a fleet of this many clients at 12 GETs a second each, through a 10 s outage")
	flag.IntVar(&fl.runs, "fleet-runs", 9, "with -fleet: simulated runs (seeds 1 to n), and real runs with -real")
	flag.BoolVar(&fl.real, "real", false, "with -fleet: also run the fleet as OS processes against a loopback server")
	flag.IntVar(&fl.child, "fleet-child", -1, "(internal) run as client i of a real fleet")
	flag.StringVar(&fl.url, "fleet-url", "", "(internal) the real fleet's server")
	flag.Int64Var(&fl.start, "fleet-start", 0, "(internal) when the real fleet starts, in Unix nanoseconds")
	flag.Parse()

	var err error
	switch {
	case fl.child >= 0:
		fleetChild(theFleet(fl.clients), fl.child, fl.url, time.Unix(0, fl.start))
	case fl.clients > 0:
		err = runFleet(os.Stdout, fl)
	default:
		err = run(os.Stdout, sc, base, cap, svgPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd:", err)
		os.Exit(1)
	}
}

// fleetFlags are the flags of the fleet (-fleet), and of a real fleet's
// child process.
type fleetFlags struct {
	clients, runs int
	real          bool
	child         int
	url           string
	start         int64
}

// runFleet runs the fleet of fl's size on the virtual clock, fl.runs
// seeds, and with fl.real as OS processes (this program again) fl.runs
// times, and writes their figures to w.
func runFleet(w io.Writer, fl fleetFlags) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return runFleetWith(w, fl, exe)
}

// runFleetWith is runFleet, with exe the program that runs a real fleet's
// clients.
func runFleetWith(w io.Writer, fl fleetFlags, exe string) error {
	if fl.runs < 1 {
		return fmt.Errorf("need -fleet-runs >= 1")
	}
	f := theFleet(fl.clients)
	var sim fleetRun
	for seed := range fl.runs {
		sim.add(simulateFleet(f, uint64(seed+1)))
	}
	var real *fleetRun
	if fl.real {
		real = new(fleetRun)
		for range fl.runs {
			fig, err := runRealFleet(f, exe)
			if err != nil {
				return err
			}
			real.add(fig)
		}
	}
	writeFleet(w, f, &sim, real)
	return nil
}

// budgetScope says how the clients share budgets.
func budgetScope(transports int) string {
	if transports == 1 {
		return "one, shared by all clients"
	}
	return fmt.Sprintf("one per Transport, %d Transports", transports)
}

func run(w io.Writer, sc scenario, base, cap time.Duration, svgPath string) error {
	if sc.Clients < 1 || sc.Capacity < 0 || sc.MaxAttempts < 1 || sc.Outage < 0 || sc.Spread < 0 || sc.Transports < 1 {
		return fmt.Errorf("need -clients >= 1, -capacity >= 0, -attempts >= 1, -transports >= 1, and durations >= 0")
	}
	var results []*result
	for _, s := range strategies(base, cap) {
		results = append(results, simulate(sc, s))
	}

	fmt.Fprintf(w, "%d clients send one request each within the first %v; the dependency is down for %v,\n", sc.Clients, sc.Spread, sc.Outage)
	fmt.Fprintf(w, "then serves %d per 10 ms and fails the rest with 503. Up to %d attempts per client, backoff\n", sc.Capacity, sc.MaxAttempts)
	fmt.Fprintf(w, "base %v, cap %v, seed %d. Each backoff runs twice, through real Transports on a virtual\n", base, cap, sc.Seed)
	fmt.Fprintf(w, "clock: with no budget, and with retryhttp's budget (%d retries of credit, %.2g earned per\n", defaultCredit, defaultRatio)
	fmt.Fprintf(w, "success, refilled in 10 s). A retry goes at its backoff, paid by the credit, unless other\n")
	fmt.Fprintf(w, "requests are in flight and another client failed since the dependency's last success: then,\n")
	fmt.Fprintf(w, "or when the credit is spent, it waits in line, oldest first. Each success lets go as many as\n")
	fmt.Fprintf(w, "the credit pays for (one let go that succeeds gives its credit back and lets the next go); after\n")
	fmt.Fprintf(w, "a silence of its own longest backoff the oldest goes as a probe; and when its request's\n")
	fmt.Fprintf(w, "schedule ends (the longest waits of the retries it has left) a retry goes if the dependency\n")
	fmt.Fprintf(w, "answered last, and gives up otherwise.\n")
	fmt.Fprintf(w, "Budgets: %s.\n\n", budgetScope(sc.Transports))
	writeHistograms(w, sc, results)
	writeTable(w, sc, results)
	writeGlance(w, sc, results)

	if svgPath != "" {
		f, err := os.Create(svgPath)
		if err != nil {
			return err
		}
		writeSVG(f, sc, results)
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nwrote %s\n", svgPath)
	}
	return nil
}
