package main

import (
	"math"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// results holds benchmark lines as cmd/measure and the scenario tests write
// them ("BenchmarkGET/lib=bare 1000 156 cpu-ns/op ..."): for each benchmark,
// library and unit, the values in the order of their lines, which for
// cmd/measure is the order of the rounds.
type results map[string]map[string]map[string][]float64

// readResults reads the file at path with benchfmt, keeping each value in
// the unit it was written in.
func readResults(path string) (results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := results{}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			bench, lib, ok := strings.Cut(string(rec.Name.Full()), "/lib=")
			if !ok {
				continue
			}
			for _, v := range rec.Values {
				unit, x := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, x = v.OrigUnit, v.OrigValue
				}
				res.add(bench, lib, unit, x)
			}
		}
	}
	return res, r.Err()
}

func (r results) add(bench, lib, unit string, v float64) {
	if r[bench] == nil {
		r[bench] = map[string]map[string][]float64{}
	}
	if r[bench][lib] == nil {
		r[bench][lib] = map[string][]float64{}
	}
	r[bench][lib][unit] = append(r[bench][lib][unit], v)
}

// has reports whether every lib has values of unit on bench.
func (r results) has(bench, unit string, libs ...string) bool {
	for _, lib := range libs {
		if len(r[bench][lib][unit]) == 0 {
			return false
		}
	}
	return true
}

// ratios returns, round by round, lib's value over ref's in the same round:
// paired, so that a change of the machine's speed between rounds cancels.
func (r results) ratios(bench, lib, ref, unit string) []float64 {
	a, b := r[bench][lib][unit], r[bench][ref][unit]
	var out []float64
	for i := range min(len(a), len(b)) {
		switch {
		case b[i] != 0:
			out = append(out, a[i]/b[i])
		case a[i] == 0:
			out = append(out, 1)
		default:
			out = append(out, math.Inf(1))
		}
	}
	return out
}

// median returns the median of lib's values of unit on bench, NaN if none.
func (r results) median(bench, lib, unit string) float64 {
	return summarize(r[bench][lib][unit]).median
}

// ratio returns the median of lib's per-round ratios to ref, NaN if none.
func (r results) ratio(bench, lib, ref, unit string) float64 {
	return summarize(r.ratios(bench, lib, ref, unit)).median
}

// A spread is the median of a set of values and its quartiles: the middle
// half of the values lies between q1 and q3.
type spread struct {
	n              int
	q1, median, q3 float64
}

// summarize returns the spread of v; its median is NaN when v is empty.
// Quantiles interpolate between the closest ranks.
func summarize(v []float64) spread {
	if len(v) == 0 {
		return spread{median: math.NaN()}
	}
	s := slices.Sorted(slices.Values(v))
	return spread{n: len(s), q1: quantile(s, 0.25), median: quantile(s, 0.5), q3: quantile(s, 0.75)}
}

// quantile returns the q-quantile of sorted, which is not empty.
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// center returns the median of lib's runs of bench in unit, as benchstat
// gives it, and its 95 % confidence interval ("± 2%"; empty when the runs
// are too few to give one); ok is false when there is no run.
func (r results) center(bench, lib, unit string) (median float64, ci string, ok bool) {
	v := r[bench][lib][unit]
	if len(v) == 0 {
		return 0, "", false
	}
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(v), &benchmath.DefaultThresholds), 0.95)
	if pct := s.PctRangeString(); pct != "∞" && pct != "?" {
		ci = "± " + pct
	}
	return s.Center, ci, true
}
