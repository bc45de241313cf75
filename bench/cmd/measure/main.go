// Command measure runs the bench module's paths through every library in
// interleaved rounds (bench.Interleave) and writes one line per sample in
// Go's benchmark format: CPU time (cpu-ns/op), wall-clock time (ns/op),
// bytes and allocations per operation ("BenchmarkGET/lib=bare ..."). The
// k-th line of a path and library is its sample of round k. bench/run.sh
// runs it; cmd/report summarises the lines.
//
//	go run ./cmd/measure -rounds 60 -target 40ms -o results/samples.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	rounds := flag.Int("rounds", 60, "rounds: each runs every path through every library once")
	target := flag.Duration("target", 40*time.Millisecond, "CPU time each sample aims at")
	paths := flag.String("paths", "", "comma-separated paths to run (default: all of "+strings.Join(bench.Paths(), ", ")+")")
	out := flag.String("o", "", "output file (default: standard output)")
	flag.Parse()
	if err := run(*rounds, *target, *paths, *out); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
}

func run(rounds int, target time.Duration, paths, out string) error {
	if rounds < 1 || target <= 0 {
		return fmt.Errorf("-rounds %d -target %v: want at least one round of a positive time", rounds, target)
	}
	var names []string
	if paths != "" {
		names = strings.Split(paths, ",")
	}
	cases, done, err := bench.Cases(names...)
	if err != nil {
		return err
	}
	defer done()
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	last := -1
	err = bench.Interleave(cases, rounds, target, func(round int, s bench.Sample) {
		if round != last {
			fmt.Fprintf(os.Stderr, "round %d of %d\n", round+1, rounds)
			last = round
		}
		fmt.Fprintln(bw, s)
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}
