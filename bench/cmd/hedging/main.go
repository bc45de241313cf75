// Command hedging measures hedged requests on the loopback interface and
// writes HEDGING.md and its chart, hedging.svg: the tail latency and the
// extra load of retryhttp's adaptive and fixed hedging and of failsafe-go's
// hedge policy, against a server whose latency is heavy-tailed, and how each
// follows a shift of that latency; then retryhttp's adaptive hedging over
// HTTP/3 (quic-go), where a loser costs a stream reset rather than a
// connection.
//
//	cd bench && go run ./cmd/hedging           # about 3 minutes
//	cd bench && go run ./cmd/hedging -h3only   # the HTTP/3 section alone, printed: about 45 s
//
// bash bench/run.sh runs it after the benchmarks.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/bench"
)

// The configurations, by the names results carry.
const (
	nameNone      = "no hedging"
	nameAdaptive  = "retryhttp adaptive"
	nameFixed     = "retryhttp fixed"
	nameFixedSlow = "retryhttp fixed, slow-tuned"
	nameFailsafe  = "failsafe-go fixed"
	nameFailsafeQ = "failsafe-go p95"
)

// failsafe-go's adaptive policy: the p95 of about the last 1000 executions
// (an exponential moving quantile), once 20 were seen, as retryhttp waits
// for 20 latencies.
const (
	failsafeQuantile  = 0.95
	failsafeAge       = 1000
	failsafeThreshold = 20
)

func main() {
	var (
		md      = flag.String("md", "HEDGING.md", "write the report here")
		svg     = flag.String("svg", "hedging.svg", "write the chart here (the report links to its base name)")
		workers = flag.Int("workers", 8, "callers in the closed loop")
		steady  = flag.Duration("steady", 10*time.Second, "how long each configuration runs against the steady server, in all")
		rounds  = flag.Int("rounds", 2, "rounds the steady runs are split into")
		shift   = flag.Duration("shift", 12*time.Second, "how long each configuration runs in the shift, which happens half way")
		seed    = flag.Uint64("seed", 1, "seed of the server's draws")
		h3      = flag.Bool("h3", true, "measure hedging over HTTP/3 too, in the steady rounds (as long again as two configurations' steady runs)")
		h3only  = flag.Bool("h3only", false, "measure only what the HTTP/3 section reports (no hedging and retryhttp adaptive, over HTTP/1.1 and HTTP/3), print that section and write no file")
	)
	flag.Parse()

	s := &study{
		Tail:    bench.Tail{Fast: 5 * time.Millisecond, Slow: 500 * time.Millisecond, SlowShare: 0.02},
		Workers: *workers,
		Steady:  *steady,
		Rounds:  max(*rounds, 1),
		Shift:   *shift,
		ShiftBy: 3,
		Seed:    *seed,
		H3:      *h3 || *h3only,
		Only3:   *h3only,
	}
	s.LoadBefore = bench.LoadAvg()
	s.measure(func(format string, args ...any) { log.Printf(format, args...) })
	s.LoadAfter = bench.LoadAvg()
	if s.Only3 {
		var w writer
		s.h3Section(&w)
		fmt.Print(w.String())
		log.Printf("load average %s before, %s after", s.LoadBefore, s.LoadAfter)
		return
	}
	s.Date = time.Now().UTC().Format("2006-01-02 15:04 UTC")
	s.Go = runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	s.CPU, s.Cores = bench.CPUModel(), runtime.NumCPU()
	s.Versions = bench.Modules("github.com/failsafe-go/failsafe-go", "github.com/hashicorp/go-cleanhttp", "github.com/quic-go/quic-go")
	s.SVG = svgName(*svg)

	var chart bytes.Buffer
	writeSVG(&chart, s)
	if err := os.WriteFile(*svg, chart.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*md, []byte(s.markdown()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and %s", *md, *svg)
}

// measure runs every configuration: first against the steady server, in
// rounds of one run of each configuration after the other (so that a change
// in the machine's load falls on all of them), then through the shift. The
// fixed delay is chosen after the first round's first two runs, by pilot
// runs of failsafe-go's fixed policy (see study.calibrate). With H3, each round ends with no hedging and retryhttp
// adaptive over HTTP/3, on the same load; with Only3, the rounds hold those
// and the same two over HTTP/1.1, and there is no shift.
func (s *study) measure(logf func(string, ...any)) {
	load := bench.HedgeLoad{Workers: s.Workers, Duration: s.Steady / time.Duration(s.Rounds), Tail: s.Tail, Seed: s.Seed}
	run := func(l bench.HedgeLoad, h bench.Hedger) bench.HedgeResult {
		r := l.Run(h)
		ls := r.Latencies(0, l.Duration)
		logf("%-8s %-28s %6d requests, p99 %v, extra %.2f %%, %d connections, %d canceled on the server",
			l.Proto, r.Name, len(ls), bench.Quantile(ls, 0.99), 100*r.Extra(), r.Conns, r.Canceled)
		return r
	}
	for round := range s.Rounds {
		load.Seed = s.Seed + uint64(round)
		none := run(load, bench.NoHedging())
		adaptive := run(load, bench.RetryhttpHedge(nameAdaptive, retryhttp.Hedge{}))
		if s.Only3 {
			s.RoundRuns = append(s.RoundRuns, []bench.HedgeResult{none, adaptive})
		} else {
			if round == 0 {
				s.calibrate(load, none, adaptive, run, logf)
			}
			s.RoundRuns = append(s.RoundRuns, []bench.HedgeResult{
				none, adaptive,
				run(load, bench.RetryhttpHedge(nameFixed, retryhttp.Hedge{Delay: s.Delay})),
				run(load, bench.FailsafeHedge(nameFailsafe, s.Delay)),
				run(load, bench.FailsafeQuantileHedge(nameFailsafeQ, failsafeQuantile, failsafeAge, failsafeThreshold)),
			})
		}
		if s.H3 {
			load3 := load
			load3.Proto = bench.HTTP3
			s.H3RoundRuns = append(s.H3RoundRuns, []bench.HedgeResult{
				run(load3, bench.NoHedging()),
				run(load3, bench.RetryhttpHedge(nameAdaptive, retryhttp.Hedge{})),
			})
		}
	}
	s.SteadyRuns = mergeRounds(s.RoundRuns)
	s.H3Runs = mergeRounds(s.H3RoundRuns)
	if s.Only3 {
		return
	}

	load.Seed = s.Seed
	load.Duration, load.ShiftAt, load.ShiftBy = s.Shift, s.Shift/2, s.ShiftBy
	slow := time.Duration(float64(s.Delay) * s.ShiftBy)
	s.ShiftRuns = []bench.HedgeResult{
		run(load, bench.NoHedging()),
		run(load, bench.RetryhttpHedge(nameAdaptive, retryhttp.Hedge{})),
		run(load, bench.RetryhttpHedge(nameFixed, retryhttp.Hedge{Delay: s.Delay})),
		run(load, bench.RetryhttpHedge(nameFixedSlow, retryhttp.Hedge{Delay: slow})),
		run(load, bench.FailsafeHedge(nameFailsafe, s.Delay)),
		run(load, bench.FailsafeQuantileHedge(nameFailsafeQ, failsafeQuantile, failsafeAge, failsafeThreshold)),
	}
}

// calibrate sets the fixed delay: the one at which failsafe-go's fixed
// policy, hedging every request unanswered after it, sends as many extra
// requests as the adaptive run did (within pilotTol), as short pilot runs
// of that policy on the same load find it (see calibrate). The unhedged
// run's latencies do not tell it: hedges add load, which lengthens the
// latencies they are drawn from, and near the bulk of the latencies a
// small change of the delay changes the hedges sent manyfold.
func (s *study) calibrate(load bench.HedgeLoad, none, adaptive bench.HedgeResult,
	run func(bench.HedgeLoad, bench.Hedger) bench.HedgeResult, logf func(string, ...any)) {
	load.Duration = pilotRun
	s.PilotTarget = adaptive.Extra()
	start := startDelay(adaptive, none, s.PilotTarget)
	t0 := time.Now()
	s.Delay, s.Pilots = calibrate(s.PilotTarget, pilotTol, start, maxPilots, func(d time.Duration) float64 {
		return run(load, bench.FailsafeHedge("pilot "+nameFailsafe+" "+ms(d), d)).Extra()
	})
	logf("fixed delay %v: %d pilot runs of %v from %v, for %.2f %% extra requests, in %v",
		s.Delay, len(s.Pilots), pilotRun, start, 100*s.PilotTarget, time.Since(t0).Round(100*time.Millisecond))
}

// mergeRounds returns the runs of each configuration in rounds merged: the
// i-th of each round's runs together.
func mergeRounds(rounds [][]bench.HedgeResult) []bench.HedgeResult {
	if len(rounds) == 0 {
		return nil
	}
	var out []bench.HedgeResult
	for i := range rounds[0] {
		var rs []bench.HedgeResult
		for _, round := range rounds {
			rs = append(rs, round[i])
		}
		out = append(out, bench.Merge(rs...))
	}
	return out
}

func svgName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// study is the measurements and what the report says of the machine.
type study struct {
	Tail    bench.Tail
	Workers int
	Steady  time.Duration // each configuration's steady runs, in all
	Rounds  int           // rounds of steady runs
	Shift   time.Duration // each shift run; the shift is half way
	ShiftBy float64
	Seed    uint64
	Delay   time.Duration // the fixed delay
	H3      bool          // measure over HTTP/3 too
	Only3   bool          // measure only what the HTTP/3 section reports

	// The fixed delay's calibration: the adaptive run's extra requests it
	// aimed at (the first round's), and its pilot runs, in order.
	PilotTarget float64
	Pilots      []pilot

	RoundRuns   [][]bench.HedgeResult // each round's runs: nameNone, nameAdaptive, nameFixed, nameFailsafe, nameFailsafeQ (with Only3, the first two)
	SteadyRuns  []bench.HedgeResult   // the rounds' runs of each configuration merged, in the same order
	ShiftRuns   []bench.HedgeResult   // nameNone, nameAdaptive, nameFixed, nameFixedSlow, nameFailsafe, nameFailsafeQ
	H3RoundRuns [][]bench.HedgeResult // each round's runs over HTTP/3: nameNone, nameAdaptive
	H3Runs      []bench.HedgeResult   // the rounds' HTTP/3 runs of each configuration merged, in the same order

	Date, Go, CPU, Versions string
	Cores                   int
	LoadBefore, LoadAfter   string
	SVG                     string // the chart's file name
}

func (s *study) steady(name string) bench.HedgeResult  { return find(s.SteadyRuns, name) }
func (s *study) shifted(name string) bench.HedgeResult { return find(s.ShiftRuns, name) }

func find(rs []bench.HedgeResult, name string) bench.HedgeResult {
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	return bench.HedgeResult{Name: name}
}

// ms formats a duration in milliseconds, with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

// pct formats a share as a percentage.
func pct(v float64) string {
	switch {
	case v >= 0.095 || v <= -0.095:
		return fmt.Sprintf("%.0f %%", 100*v)
	default:
		return fmt.Sprintf("%.1f %%", 100*v)
	}
}
