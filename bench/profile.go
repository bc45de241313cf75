package bench

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"time"
)

// Name is the name of the case, as the lines of cmd/measure name it after
// "Benchmark": "GET/resp=realistic/lib=retryhttp".
func (c Case) Name() string { return c.Path + "/lib=" + c.Lib }

// ProfileCPU runs c with the CPU profiler on, writing the profile to w,
// for at least cpu of the process's CPU time, and then checks what its
// base saw. It warms c up first, unprofiled (Interleave's calibration, for
// a twentieth of cpu), and runs it with GOMAXPROCS set to c.Procs if that
// is positive, as Interleave does, after collecting garbage. It returns
// the operations profiled and the CPU time they took. The CPU profiler
// samples at 100 Hz: cpu of 2.5 s gives about 250 samples.
func ProfileCPU(c Case, cpu time.Duration, w io.Writer) (ops int, took time.Duration, err error) {
	if cpu <= 0 {
		return 0, 0, fmt.Errorf("bench: profile %s for %v: want a positive CPU time", c.Name(), cpu)
	}
	r := c.begin()
	if err := r.calibrate(max(cpu/20, time.Millisecond)); err != nil {
		return 0, 0, err
	}
	if r.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(r.Procs))
	}
	runtime.GC()
	cpu0, err := cpuTime()
	if err != nil {
		return 0, 0, err
	}
	if err := pprof.StartCPUProfile(w); err != nil {
		return 0, 0, err
	}
	before := r.ops
	for took < cpu && err == nil {
		err = r.do(r.size)
		now, cpuErr := cpuTime()
		took, err = now-cpu0, errors.Join(err, cpuErr)
	}
	pprof.StopCPUProfile()
	if err = errors.Join(err, r.check(r.ops)); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return r.ops - before, took, nil
}
