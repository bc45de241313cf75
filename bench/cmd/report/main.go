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

type unitCol struct {
	unit, title string
	format      func(float64) string
}

var (
	nsCol     = unitCol{"sec/op", "time/op", duration}
	bytesCol  = unitCol{"B/op", "B/op", bytesNum}
	allocsCol = unitCol{"allocs/op", "allocs/op", count}
)

type report struct {
	bench, storm results
	buf          bytes.Buffer
}

func (r *report) p(format string, args ...any) { fmt.Fprintf(&r.buf, format, args...) }

// table writes one row per library: each unit as measured (± its CI) and
// as a ratio to the library named ref.
func (r *report) table(res results, bench string, libs []string, ref string, cols []unitCol) {
	r.p("| library |")
	for _, c := range cols {
		r.p(" %s |", c.title)
	}
	for _, c := range cols {
		r.p(" %s ÷ %s |", c.title, ref)
	}
	r.p("\n|---|")
	for range 2 * len(cols) {
		r.p("---:|")
	}
	r.p("\n")
	for _, lib := range libs {
		if _, ok := res[bench][lib]; !ok {
			continue
		}
		r.p("| %s |", lib)
		for _, c := range cols {
			s, ok := res.get(bench, lib, c.unit)
			if !ok {
				r.p(" – |")
				continue
			}
			r.p(" %s |", cell(c.format, s))
		}
		for _, c := range cols {
			s, ok1 := res.get(bench, lib, c.unit)
			base, ok2 := res.get(bench, ref, c.unit)
			if !ok1 || !ok2 {
				r.p(" – |")
				continue
			}
			r.p(" %s |", ratio(s.v, base.v))
		}
		r.p("\n")
	}
	r.p("\n")
}

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

var peers = []string{"retryablehttp", "failsafe-go", "rehttp"}
var equalLibs = []string{"retryhttp", "bare", "retryablehttp", "failsafe-go", "rehttp"}
var stormLibs = []string{"retryhttp", "bare", "retryhttp-nobudget", "retryablehttp", "failsafe-go", "failsafe-go-budget", "rehttp"}

func (r *report) targets() {
	b := r.bench
	v := func(bench, lib, unit string) float64 { return r.value(b, bench, lib, unit) }
	r.p("## Targets of issue 6\n\n| target | figures | status |\n|---|---|---|\n")

	// GET: fewer allocs and bytes than every peer, at most 1 alloc over bare.
	okPeers := true
	var figs []string
	for _, p := range peers {
		okPeers = okPeers && v("GET", "retryhttp", "allocs/op") < v("GET", p, "allocs/op") &&
			v("GET", "retryhttp", "B/op") < v("GET", p, "B/op")
		figs = append(figs, fmt.Sprintf("%s %s allocs, %s B", p, count(v("GET", p, "allocs/op")), count(v("GET", p, "B/op"))))
	}
	r.p("| GET success path: fewer allocations and bytes than every peer | retryhttp %s allocs, %s B; %s | %s |\n",
		count(v("GET", "retryhttp", "allocs/op")), count(v("GET", "retryhttp", "B/op")), strings.Join(figs, "; "), verdict(okPeers))
	over := v("GET", "retryhttp", "allocs/op") - v("GET", "bare", "allocs/op")
	r.p("| GET success path: at most 1 allocation over bare | retryhttp %s allocs/op, bare %s (%s over) | %s |\n",
		count(v("GET", "retryhttp", "allocs/op")), count(v("GET", "bare", "allocs/op")), count(over), verdict(over <= 1))

	// PUT: no body copy; >= 100x less B/op than retryablehttp and failsafe-go.
	extra := v("PUT1MiB", "retryhttp", "B/op") - v("PUT1MiB", "bare", "B/op")
	r.p("| 1 MiB PUT: no body copy | retryhttp %s/op, bare %s/op: %s more than bare, against a body of 1 MiB | %s |\n",
		bytesNum(v("PUT1MiB", "retryhttp", "B/op")), bytesNum(v("PUT1MiB", "bare", "B/op")), bytesNum(max(extra, 0)), verdict(extra < 10<<10))
	for _, p := range []string{"retryablehttp", "failsafe-go"} {
		q := v("PUT1MiB", p, "B/op") / v("PUT1MiB", "retryhttp", "B/op")
		r.p("| 1 MiB PUT: at least 100× less B/op than %s | %s %s/op ÷ retryhttp %s/op = %s | %s |\n",
			p, p, bytesNum(v("PUT1MiB", p, "B/op")), bytesNum(v("PUT1MiB", "retryhttp", "B/op")),
			ratio(v("PUT1MiB", p, "B/op"), v("PUT1MiB", "retryhttp", "B/op")), verdict(q >= 100))
	}

	// Storm: at most 1.25 attempts per logical request during the outage.
	a := r.value(r.storm, "Storm", "retryhttp", "attempts/call")
	st := r.value(r.storm, "Storm", "retryhttp", "steady-attempts/call")
	r.p("| storm: at most 1.25 attempts per logical request during the outage, default budget | retryhttp %.3f over the whole outage, %.3f in its steady state (retryablehttp %.2f, failsafe-go %.2f, rehttp %.2f) | %s |\n\n",
		a, st, r.value(r.storm, "Storm", "retryablehttp", "attempts/call"),
		r.value(r.storm, "Storm", "failsafe-go", "attempts/call"), r.value(r.storm, "Storm", "rehttp", "attempts/call"),
		verdict(a <= 1.25 && st <= 1.25))
}

func (r *report) stormTable() {
	s := r.storm
	cols := []struct{ unit, title string }{
		{"attempts/call", "attempts per call, outage"},
		{"steady-attempts/call", "attempts per call, steady outage"},
		{"peak-attempts/100ms", "peak attempts per 100 ms"},
		{"outage-success-%", "outage calls that succeeded"},
		{"after-success-%", "calls after recovery that succeeded"},
	}
	r.p("| library |")
	for _, c := range cols {
		r.p(" %s |", c.title)
	}
	r.p(" attempts per call ÷ retryhttp | peak ÷ retryhttp |\n|---|")
	for range len(cols) + 2 {
		r.p("---:|")
	}
	r.p("\n")
	for _, lib := range stormLibs {
		if _, ok := s["Storm"][lib]; !ok {
			continue
		}
		r.p("| %s |", lib)
		for _, c := range cols {
			st, ok := s.get("Storm", lib, c.unit)
			if !ok {
				r.p(" – |")
				continue
			}
			format := func(v float64) string { return fmt.Sprintf("%.3f", v) }
			switch {
			case strings.HasSuffix(c.unit, "%"):
				format = func(v float64) string { return fmt.Sprintf("%.1f %%", v) }
			case strings.HasPrefix(c.unit, "peak"):
				format = count
			}
			r.p(" %s |", cell(format, st))
		}
		for _, u := range []string{"attempts/call", "peak-attempts/100ms"} {
			r.p(" %s |", ratio(r.value(s, "Storm", lib, u), r.value(s, "Storm", "retryhttp", u)))
		}
		r.p("\n")
	}
	r.p("\n")
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
	benchCSV := flag.String("bench", "", "benchstat CSV of the benchmarks")
	stormCSV := flag.String("storm", "", "benchstat CSV of the storm")
	goVersion := flag.String("go", "", "go version")
	cpu := flag.String("cpu", "", "CPU model")
	cores := flag.String("cores", "", "cores")
	loadBefore := flag.String("load-before", "", "load average before the run")
	loadAfter := flag.String("load-after", "", "load average after the run")
	date := flag.String("date", "", "date of the run")
	count := flag.String("count", "", "-count of the runs")
	versions := flag.String("versions", "", "file listing the module versions")
	commands := flag.String("commands", "", "file holding the commands that were run")
	out := flag.String("o", "BENCHMARKS.md", "output file")
	flag.Parse()

	var r report
	var err error
	if r.bench, err = parse(*benchCSV); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if r.storm, err = parse(*stormCSV); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	r.write(*goVersion, *cpu, *cores, *loadBefore, *loadAfter, *date, *count, readOr(*versions, "?"), readOr(*commands, "bash bench/run.sh"))
	if err := os.WriteFile(*out, r.buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}
