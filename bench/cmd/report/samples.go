package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// samples holds the lines cmd/measure wrote: for each benchmark, library
// and unit, the value of each sample in the order of the rounds.
type samples map[string]map[string]map[string][]float64

// parseSamples reads lines of Go's benchmark format,
// "BenchmarkPath/lib=name[-P] N value unit value unit...", skipping the
// others.
func parseSamples(path string) (samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := samples{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := gomaxprocs.ReplaceAllString(strings.TrimPrefix(fields[0], "Benchmark"), "")
		bench, lib, ok := strings.Cut(name, "/lib=")
		if !ok {
			continue
		}
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("%s:%d: a value without its unit", path, line)
		}
		for i := 2; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
			s.add(bench, lib, fields[i+1], v)
		}
	}
	return s, sc.Err()
}

func (s samples) add(bench, lib, unit string, v float64) {
	if s[bench] == nil {
		s[bench] = map[string]map[string][]float64{}
	}
	if s[bench][lib] == nil {
		s[bench][lib] = map[string][]float64{}
	}
	s[bench][lib][unit] = append(s[bench][lib][unit], v)
}

// values returns the samples of lib on bench in unit, in round order; with
// perSecond, each turned from a time per operation into operations per
// second.
func (s samples) values(bench, lib, unit string, perSecond bool) []float64 {
	v := s[bench][lib][unit]
	if !perSecond {
		return v
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = 1e9 / x
	}
	return out
}

// ratios returns, round by round, the value of lib over that of ref in the
// same round: paired, so that a change of the machine's speed between
// rounds cancels out.
func (s samples) ratios(bench, lib, ref, unit string, perSecond bool) []float64 {
	a, b := s.values(bench, lib, unit, perSecond), s.values(bench, ref, unit, perSecond)
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

// A summary describes a set of samples: its median, its quartiles (the
// interquartile range holds the middle half of the samples) and its
// extremes.
type summary struct {
	n                        int
	min, q1, median, q3, max float64
}

// summarize returns the summary of v, or one of n 0 if v is empty.
// Quantiles interpolate linearly between the closest ranks, so the median
// of an even number of samples is the mean of the middle two.
func summarize(v []float64) summary {
	if len(v) == 0 {
		return summary{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return summary{n: len(s), min: s[0], q1: quantile(s, 0.25), median: quantile(s, 0.5), q3: quantile(s, 0.75), max: s[len(s)-1]}
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
