package bench

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each round runs the libraries of each path in an order shuffled for the
// round, one path after the other; every case gets one sample a round, of the size
// calibrated for it, and its check sees every operation it ran. A case
// with Procs runs with that GOMAXPROCS, the others with the process's.
func TestInterleaveShufflesTheLibrariesEachRound(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 {
		runtime.GOMAXPROCS(2)
		defer runtime.GOMAXPROCS(procs)
		procs = 2
	}
	var ran []string // the case of each operation, in order
	var checked []string
	var cases []Case
	for _, path := range []string{"P", "Q"} {
		for _, lib := range []string{"a", "b", "c"} {
			name := path + "/" + lib
			want := procs
			c := Case{Path: path, Lib: lib, Callers: 1}
			if path == "P" {
				c.Procs, want = 1, 1
			}
			c.start = func() ([]func() error, func(int) error) {
				ops := 0
				send := func() error {
					if n := runtime.GOMAXPROCS(0); n != want {
						return fmt.Errorf("%s ran with GOMAXPROCS %d, want %d", name, n, want)
					}
					ops++
					if len(ran) == 0 || ran[len(ran)-1] != name {
						ran = append(ran, name)
					}
					return nil
				}
				return []func() error{send}, func(n int) error {
					if n != ops {
						return fmt.Errorf("%s: checked %d operations, ran %d", name, n, ops)
					}
					checked = append(checked, name)
					return nil
				}
			}
			cases = append(cases, c)
		}
	}
	var got []string
	rounds := map[int]int{}
	err := Interleave(cases, 3, 200*time.Microsecond, func(round int, s Sample) {
		got = append(got, s.Path+"/"+s.Lib)
		rounds[round]++
		if s.Ops < 1 {
			t.Errorf("a sample of %d operations", s.Ops)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each round runs every case once, the paths in order, each path's
	// libraries in that round's shuffled order; and the order changes
	// from round to round (seeded: the same in every run).
	var orders []string
	for r := 0; r < 3; r++ {
		round := got[6*r : 6*r+6]
		if !slices.ContainsFunc(round[:3], func(s string) bool { return s[0] == 'P' }) ||
			round[0][0] != 'P' || round[3][0] != 'Q' {
			t.Errorf("round %d ran %v: not path P's cases, then Q's", r, round)
		}
		var p, q []string
		for _, s := range round[:3] {
			p = append(p, s[2:])
		}
		for _, s := range round[3:] {
			q = append(q, s[2:])
		}
		sorted := slices.Sorted(slices.Values(p))
		if !slices.Equal(sorted, []string{"a", "b", "c"}) || !slices.Equal(p, q) {
			t.Errorf("round %d ran %v: each library once, in one order for both paths", r, round)
		}
		orders = append(orders, strings.Join(p, ""))
	}
	if orders[0] == orders[1] && orders[1] == orders[2] {
		t.Errorf("the same order in every round: %v", orders)
	}
	if !slices.Equal(ran[len(ran)-len(got):], got) {
		t.Errorf("the rounds ran the cases in the order\n%v\nbut sampled\n%v", ran[len(ran)-len(got):], got)
	}
	if rounds[0] != 6 || rounds[1] != 6 || rounds[2] != 6 {
		t.Errorf("samples by round %v, want 6 in each of rounds 0, 1 and 2", rounds)
	}
	if len(checked) != len(cases) {
		t.Errorf("checked %v, want every case", checked)
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d after the rounds, want %d as before", n, procs)
	}
}

// The in-memory paths through every library, in two short rounds: every
// request is answered as the path says (the checks of each case pass:
// every answer 200 read to its end and closed), the bare base allocates
// nothing on the GET and retry paths (on the PUT and the POST it pays for
// the request each operation makes), and the allocations a sample counts
// per operation are those testing.AllocsPerRun counts (unless the race
// detector, which allocates on its own, runs).
func TestInterleaveInMemoryPaths(t *testing.T) {
	cases, done, err := Cases(PathGET, PathPUT, PathPOST, PathRetry)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	samples := map[string][]Sample{}
	err = Interleave(cases, 2, 2*time.Millisecond, func(_ int, s Sample) {
		name := s.Path + "/lib=" + s.Lib
		samples[name] = append(samples[name], s)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		name := c.Path + "/lib=" + c.Lib
		got := samples[name]
		if len(got) != 2 {
			t.Errorf("%s: %d samples, want 2", name, len(got))
			continue
		}
		r := c.begin()
		want := testing.AllocsPerRun(20, func() {
			if err := r.do(1); err != nil {
				t.Fatal(err)
			}
		})
		for _, s := range got {
			if s.CPU <= 0 || s.Wall <= 0 {
				t.Errorf("%s: CPU %v, wall %v for %d operations", name, s.CPU, s.Wall, s.Ops)
			}
			if n := float64(s.Allocs) / float64(s.Ops); math.Round(n) != want && !raceEnabled {
				t.Errorf("%s: %.3f allocations per operation, testing.AllocsPerRun counts %v", name, n, want)
			}
		}
		// The runtime may allocate for itself while a sample runs: a
		// handful of bytes over thousands of operations.
		a, b := float64(got[0].Allocs)/float64(got[0].Ops), float64(got[0].Bytes)/float64(got[0].Ops)
		if c.Lib == "bare" && (c.Path == PathGET || c.Path == PathRetry) && (a >= 0.5 || b >= 0.5) && !raceEnabled {
			t.Errorf("%s: %.3f allocations, %.3f bytes per operation; want none", name, a, b)
		}
	}
}

// The loopback paths, HTTP/1.1 and HTTP/2, through every library in one
// short round: every caller's GETs are answered 200 with the server's whole
// body, and the server received one request per operation.
func TestInterleaveLoopbackPaths(t *testing.T) {
	var paths []string
	for _, p := range Paths() {
		if strings.HasPrefix(p, "Loopback/") {
			paths = append(paths, p)
		}
	}
	cases, done, err := Cases(paths...)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	n := 0
	err = Interleave(cases, 1, 2*time.Millisecond, func(_ int, s Sample) {
		n++
		if s.Ops < 1 {
			t.Errorf("%s/lib=%s: %d operations", s.Path, s.Lib, s.Ops)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(cases) {
		t.Errorf("%d samples, want %d", n, len(cases))
	}
}
