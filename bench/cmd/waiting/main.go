// Command waiting measures what a request costs while it waits to be
// retried (bench.Waiting): 10,000 GETs through one client while an
// in-memory dependency answers 503 for 2 s, the heap and the goroutine
// stacks they hold 1.5 s into the outage, and how long the client takes to
// serve them once the dependency is back. Each library runs in a process
// of its own (this command again, with -child), -runs times, the order
// rotated by one from run to run. It writes WAITING.md (-md), or the
// results table to standard output.
//
//	cd bench && go run ./cmd/waiting -runs 3 -md WAITING.md   # about 3 minutes
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// exitLate is a child's exit code when its measurement came too late
// (bench.ErrLateMeasurement): the parent runs it again, up to lateTries
// times in all. On a busy machine the reading can end after the outage:
// the measuring goroutine wakes late, and a collection over 10,000
// goroutines retrying at once takes longer than the 0.5 s left.
const (
	exitLate  = 3
	lateTries = 5
)

func main() {
	d := bench.DefaultWaiting
	runs := flag.Int("runs", 3, "runs of every library")
	libs := flag.String("libs", strings.Join(bench.WaitLibNames(), ","), "comma-separated libraries")
	flag.IntVar(&d.Requests, "requests", d.Requests, "concurrent requests")
	flag.DurationVar(&d.Outage, "outage", d.Outage, "how long the dependency answers 503")
	flag.DurationVar(&d.At, "at", d.At, "when to measure, into the outage")
	flag.DurationVar(&d.Deadline, "deadline", d.Deadline, "each request's deadline")
	rev := flag.String("rev", "", "the revision of retryhttp measured, for the report")
	md := flag.String("md", "", "write the report here (default: the table on standard output)")
	child := flag.Bool("child", false, "run -lib once in this process and print its result as JSON")
	lib := flag.String("lib", "", "the library of -child")
	heap := flag.String("heapprofile", "", "with -child: write a heap profile at the measurement here")
	flag.Parse()
	if *child {
		err := runChild(d, *lib, *heap)
		if errors.Is(err, bench.ErrLateMeasurement) {
			log.Print(err)
			os.Exit(exitLate)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	names := strings.Split(*libs, ",")
	results, err := measure(d, names, *runs)
	if err != nil {
		log.Fatal(err)
	}
	machine := fmt.Sprintf("%s %s/%s, %d CPUs", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if *rev != "" {
		machine += ", retryhttp " + *rev
	}
	meta := bench.WaitMeta{Waiting: d, Runs: *runs, Libs: names, Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Machine: machine}
	var b bytes.Buffer
	if err := bench.WriteWaitingReport(&b, meta, results); err != nil {
		log.Fatal(err)
	}
	if *md == "" {
		_, err = os.Stdout.Write(b.Bytes())
	} else {
		err = os.WriteFile(*md, b.Bytes(), 0o644)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// runChild runs w through the library called name and prints the result;
// with heapProfile, it writes the heap profile at the measurement there.
func runChild(w bench.Waiting, name, heapProfile string) error {
	lib, ok := bench.WaitLibByName(name)
	if !ok {
		return fmt.Errorf("no library %q (have %s)", name, strings.Join(bench.WaitLibNames(), ", "))
	}
	if heapProfile != "" {
		runtime.MemProfileRate = 1 // every allocation, for bytes per request
		f, err := os.Create(heapProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		w.HeapProfile = f
	}
	res, err := w.Run(lib)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// measure runs every library runs times, each run in a process of its own
// and, when its measurement comes too late, up to lateTries times in all; a
// run late every time is left out (WAITING.md says so).
func measure(w bench.Waiting, libs []string, runs int) ([]bench.WaitResult, error) {
	var results []bench.WaitResult
	for r := range runs {
		for i := range libs {
			l := libs[(i+r)%len(libs)]
			res, err := child(w, l)
			for try := 1; try < lateTries && exitCode(err) == exitLate; try++ {
				log.Printf("run %d, %s: the measurement came too late (a busy machine?); once more", r+1, l)
				res, err = child(w, l)
			}
			if exitCode(err) == exitLate {
				log.Printf("run %d, %s: too late %d times in a row; left out", r+1, l, lateTries)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("run %d, %s: %w", r+1, l, err)
			}
			log.Printf("run %d %-24s heap %6.0f B/req, stack %6.0f B/req, served %d of %d",
				r+1, l, res.HeapPerRequest(), res.StackPerRequest(), res.Served, res.Requests)
			results = append(results, res)
		}
	}
	return results, nil
}

// exitCode returns the exit code of a child that failed with err, or 0.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// child runs this command again with -child for lib and reads its result.
func child(w bench.Waiting, lib string) (bench.WaitResult, error) {
	var res bench.WaitResult
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	cmd := exec.Command(exe, "-child", "-lib", lib, "-requests", fmt.Sprint(w.Requests),
		"-outage", w.Outage.String(), "-at", w.At.String(), "-deadline", w.Deadline.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(out, &res)
}
