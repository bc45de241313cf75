package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Sample is what one run of a case measured: Ops operations, shared out
// among the case's callers.
type Sample struct {
	Path, Lib string
	Ops       int

	// CPU is the CPU time the process used, user and system, in all its
	// threads: the library's work, the garbage collection it causes and,
	// on the loopback paths, the server's and net/http's work too. Unlike
	// Wall, it does not grow while other processes hold the CPUs.
	CPU  time.Duration
	Wall time.Duration

	Allocs uint64 // heap allocations, in every goroutine
	Bytes  uint64 // bytes of them
}

// String formats s as a line of Go's benchmark format, per operation:
// CPU time (cpu-ns/op), wall-clock time (ns/op), bytes and allocations.
func (s Sample) String() string {
	n := float64(s.Ops)
	return fmt.Sprintf("Benchmark%s/lib=%s\t%d\t%.2f cpu-ns/op\t%.2f ns/op\t%.2f B/op\t%.4f allocs/op",
		s.Path, s.Lib, s.Ops, float64(s.CPU)/n, float64(s.Wall)/n, float64(s.Bytes)/n, float64(s.Allocs)/n)
}

// A run is a case that was started.
type run struct {
	Case
	senders []func() error
	check   func(ops int) error
	ops     int // operations run so far
	size    int // operations per sample, once calibrated
}

func (c Case) begin() *run {
	senders, check := c.start()
	return &run{Case: c, senders: senders, check: check}
}

// sample runs n operations and measures them, with GOMAXPROCS set to
// r.Procs if that is positive. It collects garbage first, so that none left
// by an earlier case is collected, and paid for, in this one.
func (r *run) sample(n int) (Sample, error) {
	if r.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(r.Procs))
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, err := cpuTime()
	if err != nil {
		return Sample{}, err
	}
	start := time.Now()
	err = r.do(n)
	wall := time.Since(start)
	cpu1, cpuErr := cpuTime()
	runtime.ReadMemStats(&m1)
	if err = errors.Join(err, cpuErr); err != nil {
		return Sample{}, fmt.Errorf("%s/lib=%s: %w", r.Path, r.Lib, err)
	}
	return Sample{Path: r.Path, Lib: r.Lib, Ops: n, CPU: cpu1 - cpu0, Wall: wall,
		Allocs: m1.Mallocs - m0.Mallocs, Bytes: m1.TotalAlloc - m0.TotalAlloc}, nil
}

// do runs n operations: on this goroutine for one caller, else shared out
// among the callers' goroutines as they go. It stops at the first error.
func (r *run) do(n int) error {
	r.ops += n
	if len(r.senders) == 1 {
		send := r.senders[0]
		for range n {
			if err := send(); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		left atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, len(r.senders))
	)
	left.Store(int64(n))
	for i, send := range r.senders {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := send(); err != nil {
					errs[i] = err
					left.Store(math.MinInt64 / 2) // the others stop too
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// calibrate warms r up and sets its size: the operations that take about
// target of CPU time. It runs r with 1, 4, 16... operations until a run
// takes a quarter of target, then scales.
func (r *run) calibrate(target time.Duration) error {
	for n := 1; ; n *= 4 {
		s, err := r.sample(n)
		if err != nil {
			return err
		}
		if s.CPU >= target/4 || n >= 1<<30 {
			r.size = max(1, int(float64(n)*float64(target)/float64(max(s.CPU, 1))))
			return nil
		}
	}
}

// Interleave runs cases in rounds, each case once a round for about target
// of CPU time, and passes each sample to record with its round, 0 first.
// Within a round the paths come in the order of cases, and each path's
// libraries in an order shuffled afresh each round (seeded by the round,
// so a run is repeatable). Every library thus meets the machine in each
// state it drifts through, and no library follows or precedes the same
// one round after round (a rotation kept each library's neighbours, and
// a library measured right before another shared its costs, a GC's say). Before the rounds each case is calibrated
// (and so warmed up); after them, what its base saw is checked.
func Interleave(cases []Case, rounds int, target time.Duration, record func(round int, s Sample)) error {
	var (
		paths []string
		libs  = map[string][]*run{}
	)
	for _, c := range cases {
		if _, ok := libs[c.Path]; !ok {
			paths = append(paths, c.Path)
		}
		libs[c.Path] = append(libs[c.Path], c.begin())
	}
	for _, p := range paths {
		for _, r := range libs[p] {
			if err := r.calibrate(target); err != nil {
				return err
			}
		}
	}
	for round := range rounds {
		for _, p := range paths {
			l := slices.Clone(libs[p])
			rng := rand.New(rand.NewPCG(uint64(round), 0))
			rng.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			for _, r := range l {
				s, err := r.sample(r.size)
				if err != nil {
					return err
				}
				record(round, s)
			}
		}
	}
	var errs []error
	for _, p := range paths {
		for _, r := range libs[p] {
			if err := r.check(r.ops); err != nil {
				errs = append(errs, fmt.Errorf("%s/lib=%s: %w", r.Path, r.Lib, err))
			}
		}
	}
	return errors.Join(errs...)
}
