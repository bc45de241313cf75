// Command report writes BENCHMARKS.md from the summaries benchstat made of
// the bench module's runs (benchstat -format csv). bench/run.sh runs it; it
// measures nothing itself.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// A stat is one benchstat summary: the median of the runs and its 95 %
// confidence interval as benchstat prints it ("± 2%").
type stat struct {
	v  float64
	ci string
}

// results maps benchmark, then library, then unit to a summary.
type results map[string]map[string]map[string]stat

var gomaxprocs = regexp.MustCompile(`-\d+$`)

// parse reads benchstat's CSV: sections of a header row, a row naming the
// unit, rows "Bench/lib=name[-P],value,CI", then a geomean row.
func parse(path string) (results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := results{}
	var unit string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		switch {
		case len(f) < 2:
			continue
		case f[0] == "" && len(f) >= 3 && f[2] == "CI":
			unit = f[1]
			continue
		case f[0] == "" || unit == "":
			continue
		}
		name := gomaxprocs.ReplaceAllString(f[0], "")
		bench, lib, ok := strings.Cut(name, "/lib=")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		s := stat{v: v}
		if len(f) >= 3 && f[2] != "" && f[2] != "∞" {
			s.ci = "± " + f[2]
		}
		if res[bench] == nil {
			res[bench] = map[string]map[string]stat{}
		}
		if res[bench][lib] == nil {
			res[bench][lib] = map[string]stat{}
		}
		res[bench][lib][unit] = s
	}
	return res, sc.Err()
}

func (r results) get(bench, lib, unit string) (stat, bool) {
	s, ok := r[bench][lib][unit]
	return s, ok
}

// num formats v with a precision that suits its size.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e6:
		return fmt.Sprintf("%.3g", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// bytesNum formats a count of bytes.
func bytesNum(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// duration formats a time in seconds.
func duration(v float64) string {
	switch {
	case v >= 1e-3:
		return fmt.Sprintf("%.3g ms", v*1e3)
	case v >= 1e-6:
		return fmt.Sprintf("%.3g µs", v*1e6)
	default:
		return fmt.Sprintf("%.0f ns", v*1e9)
	}
}

// count formats a count, whole when it is.
func count(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// cell formats a summary: its value and, if known, its interval.
func cell(format func(float64) string, s stat) string {
	if s.ci == "" {
		return format(s.v)
	}
	return format(s.v) + " " + s.ci
}

// ratio formats v/base.
func ratio(v, base float64) string {
	switch {
	case base == 0 && v == 0:
		return "1×"
	case base == 0:
		return "∞"
	}
	q := v / base
	switch {
	case q >= 100:
		return fmt.Sprintf("%.0f×", q)
	case q >= 10:
		return fmt.Sprintf("%.1f×", q)
	default:
		return fmt.Sprintf("%.2f×", q)
	}
}

type report struct {
	cpu  samples  // the measured paths (cmd/measure)
	scen results  // the scenarios (Storm, Fleet, Blip, Overload)
	prof profiles // CPU profiles of retryhttp's rows (cmd/profile)
	runs string   // how many times each scenario ran
	// everydayReadme and anchorsOut are the inputs of the everyday faults'
	// section: chaos/README.md, and TestEverydayFaultsAnchors' output.
	everydayReadme, anchorsOut string
	// waitingMD is bench/WAITING.md, whose tables the report copies.
	waitingMD string
	// fleetTxt is bench/FLEET.txt, which the report copies.
	fleetTxt string
	buf      bytes.Buffer
}

func (r *report) p(format string, args ...any) { fmt.Fprintf(&r.buf, format, args...) }

func (r *report) value(res results, bench, lib, unit string) float64 {
	s, ok := res.get(bench, lib, unit)
	if !ok {
		return math.NaN()
	}
	return s.v
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

var scenarioLibs = []string{"retryhttp", "bare", "retryhttp-nobudget", "retryhttp-throttle", "retryablehttp", "failsafe-go", "failsafe-go-budget", "failsafe-go-breaker", "rehttp"}

func (r *report) targets() {
	r.p("## Targets\n\n| target | figures | status |\n|---|---|---|\n")
	r.perfTargets()
	r.optInTargets()
	r.overloadTargets()

	// The budget's scenarios, with retryhttp's default budget.
	sv := func(bench, unit string) float64 { return r.value(r.scen, bench, "retryhttp", unit) }
	peers := func(bench, unit, format string) string {
		var f []string
		for _, p := range []string{"retryhttp-nobudget", "retryablehttp", "failsafe-go", "failsafe-go-budget", "rehttp"} {
			f = append(f, fmt.Sprintf("%s "+format, p, r.value(r.scen, bench, p, unit)))
		}
		return strings.Join(f, ", ")
	}
	a, pk, long := sv("Storm", "attempts/call"), sv("Storm", "peak/100ms"), sv("Storm", "longest-call-sec")
	r.p("| storm: at most 1.30 attempts per call over the outage, at most 40 attempts in any 100 ms, no call held over 15 s | retryhttp %.4f attempts per call, peak %s, longest call %.2f s (%s attempts per call) | %s |\n",
		a, count(pk), long, peers("Storm", "attempts/call", "%.2f"), verdict(a <= 1.30 && pk <= 40 && long <= 15))
	a, pk = sv("Fleet", "attempts/call"), sv("Fleet", "start-peak/100ms")
	r.p("| fleet: at most 1.35 attempts per call over the outage, at most 180 attempts (1.5× the 120 offered) in any 100 ms of its first second | retryhttp %.4f attempts per call, onset peak %s (%s attempts per call) | %s |\n",
		a, count(pk), peers("Fleet", "attempts/call", "%.2f"), verdict(a <= 1.35 && pk <= 180))
	ok, a, pk := sv("Blip", "success-%"), sv("Blip", "attempts/caller"), sv("Blip", "peak/10ms")
	r.p("| blip: at least 99 %% of the callers served, at most 3.0 attempts per caller, at most 60 attempts in any 10 ms once up | retryhttp %.1f %%, %.2f attempts per caller, peak %s (%s served) | %s |\n\n",
		ok, a, count(pk), peers("Blip", "success-%", "%.1f %%"), verdict(ok >= 99 && a <= 3 && pk <= 60))
}

// A scenarioCol is a column of a scenario's table: a unit and how to show
// it.
type scenarioCol struct {
	unit, title string
	format      func(float64) string
	noCI        bool   // a setting, not a measurement: no interval
	ratio       bool   // show the unit's ratio to retryhttp's instead
	unlessZero  string // show "–" where this unit is zero (nothing to time)
}

func fixed(prec int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) }
}

func percent(v float64) string { return fmt.Sprintf("%.1f %%", v) }

func seconds(v float64) string { return fmt.Sprintf("%.2f s", v) }

// scenarioTable writes one row per library of the scenario bench.
func (r *report) scenarioTable(bench string, cols []scenarioCol) {
	s := r.scen
	r.p("| library |")
	for _, c := range cols {
		if c.ratio {
			r.p(" %s ÷ retryhttp |", c.title)
		} else {
			r.p(" %s |", c.title)
		}
	}
	r.p("\n|---|")
	for range cols {
		r.p("---:|")
	}
	r.p("\n")
	for _, lib := range scenarioLibs {
		if _, ok := s[bench][lib]; !ok {
			continue
		}
		r.p("| %s |", lib)
		for _, c := range cols {
			st, ok := s.get(bench, lib, c.unit)
			switch {
			case !ok || (c.unlessZero != "" && r.value(s, bench, lib, c.unlessZero) == 0):
				r.p(" – |")
			case c.ratio:
				r.p(" %s |", ratio(st.v, r.value(s, bench, "retryhttp", c.unit)))
			case c.noCI:
				r.p(" %s |", c.format(st.v))
			default:
				r.p(" %s |", cell(c.format, st))
			}
		}
		r.p("\n")
	}
	r.p("\n")
}

// peaksTable writes, for each library, the busiest 100 ms of the outage's
// first second, of the rest of the outage, and of the first second after
// it, with the retries in each.
func (r *report) peaksTable(bench string) {
	s := r.scen
	r.p("| library | outage's first second | rest of the outage | first second after it |\n|---|---:|---:|---:|\n")
	for _, lib := range scenarioLibs {
		if _, ok := s[bench][lib]; !ok {
			continue
		}
		r.p("| %s |", lib)
		for _, phase := range []string{"start", "rest", "recovery"} {
			n, ok1 := s.get(bench, lib, phase+"-peak/100ms")
			k, ok2 := s.get(bench, lib, phase+"-peak-retries")
			if !ok1 || !ok2 {
				r.p(" – |")
				continue
			}
			r.p(" %s (%s retries)", count(n.v), count(k.v))
			if at, ok := s.get(bench, lib, phase+"-peak-at-sec"); ok {
				r.p(" at %s", seconds(at.v))
			}
			r.p(" |")
		}
		r.p("\n")
	}
	r.p("\n")
}

// stormCols are the columns of the storm's and the fleet's tables.
var stormCols = []scenarioCol{
	{unit: "max-attempts", title: "attempts at most", format: count, noCI: true},
	{unit: "attempts/call", title: "attempts per call, outage", format: fixed(4)},
	{unit: "outage-success-%", title: "outage calls served", format: percent},
	{unit: "after-success-%", title: "calls after it served", format: percent},
	{unit: "peak/100ms", title: "peak per 100 ms", format: count},
	{unit: "peak-retries", title: "retries in the peak", format: count},
	{unit: "peak-at-sec", title: "peak at", format: seconds},
	{unit: "longest-call-sec", title: "longest call", format: seconds},
	{unit: "attempts/call", title: "attempts per call", ratio: true},
	{unit: "peak/100ms", title: "peak", ratio: true},
}

// blipCols are the columns of the blip's table.
var blipCols = []scenarioCol{
	{unit: "max-attempts", title: "attempts at most", format: count, noCI: true},
	{unit: "success-%", title: "callers served", format: percent},
	{unit: "attempts/caller", title: "attempts per caller", format: fixed(2)},
	{unit: "peak/10ms", title: "peak per 10 ms once up", format: count},
	{unit: "peak-retries", title: "retries in the peak", format: count},
	{unit: "peak-at-sec", title: "peak at", format: seconds, unlessZero: "peak/10ms"},
	{unit: "last-served-sec", title: "last caller served at", format: seconds, unlessZero: "success-%"},
	{unit: "last-ended-sec", title: "last call ended at", format: seconds},
	{unit: "attempts/caller", title: "attempts per caller", ratio: true},
}

func readOr(path, fallback string) string {
	if path == "" {
		return fallback
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fallback
	}
	return strings.TrimRight(string(b), "\n")
}

func main() {
	samplesFile := flag.String("samples", "", "the samples cmd/measure wrote")
	profilesFile := flag.String("profiles", "", "the CPU profiles' summaries cmd/profile wrote (none if empty)")
	scenCSV := flag.String("scenarios", "", "benchstat CSV of the scenarios (storm, fleet, blip, overload)")
	goVersion := flag.String("go", "", "go version")
	cpu := flag.String("cpu", "", "CPU model")
	cores := flag.String("cores", "", "cores")
	loadBefore := flag.String("load-before", "", "load average before the run")
	loadAfter := flag.String("load-after", "", "load average after the run")
	date := flag.String("date", "", "date of the run")
	count := flag.String("count", "", "-count of the scenarios' runs")
	rounds := flag.String("rounds", "", "rounds of the measured paths")
	target := flag.String("target", "", "CPU time of each sample of the measured paths")
	versions := flag.String("versions", "", "file listing the module versions")
	commands := flag.String("commands", "", "file holding the commands that were run")
	everyday := flag.String("everyday", "", "chaos/README.md, whose TestEverydayRealFaults tables the report copies (none if empty)")
	anchors := flag.String("anchors", "", "the output of go test -run TestEverydayFaultsAnchors -faults.anchors -v at the repository root (none if empty)")
	waiting := flag.String("waiting", "", "bench/WAITING.md, whose target and results tables the report copies (none if empty)")
	fleet := flag.String("fleet", "", "bench/FLEET.txt, the real fleet against its simulation, which the report copies (none if empty)")
	out := flag.String("o", "BENCHMARKS.md", "output file")
	flag.Parse()

	r := report{everydayReadme: *everyday, anchorsOut: *anchors, waitingMD: *waiting, fleetTxt: *fleet}
	var err error
	if r.cpu, err = parseSamples(*samplesFile); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if r.prof, err = parseProfiles(*profilesFile); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if r.scen, err = parse(*scenCSV); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	r.write(*goVersion, *cpu, *cores, *loadBefore, *loadAfter, *date, *count, *rounds, *target, readOr(*versions, "?"), readOr(*commands, "bash bench/run.sh"))
	if err := os.WriteFile(*out, r.buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}
