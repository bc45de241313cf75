// Command waiting measures what a request costs while it waits to be
// retried (bench.Waiting): 10,000 GETs through one client while an
// in-memory dependency answers 503 for 2 s, the heap and the goroutine
// stacks they hold 1.5 s into the outage, and how long the client takes to
// serve them all once the dependency is back. Each library runs in a
// process of its own (this command, run again with -child), one library
// after the other, -runs times, the order rotated by one from run to run.
// Then, unless -explain=false, it looks at where each library's memory
// goes: a process per library dumps the stack of a waiting request, frame
// by frame (the runtime's traceback, GOTRACEBACK=system), and another
// profiles the heap that 2,000 waiting requests hold, every allocation
// sampled. It writes all of it as JSON (-o) and as Markdown (-md).
//
//	cd bench && go run ./cmd/waiting -o results/waiting.json -md WAITING.md   # about 2 minutes
//	go run ./cmd/waiting -from results/waiting.json -md WAITING.md            # the report again, from the JSON
//
// -child -lib NAME runs one library once and prints its result as JSON.
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

// The requests of the process that profiles the heap: every allocation
// sampled slows the start of 10,000 requests past the measurement.
const sitesRequests = 2000

func main() {
	var (
		runs     = flag.Int("runs", 3, "runs of every library")
		libs     = flag.String("libs", strings.Join(bench.WaitLibNames(), ","), "comma-separated libraries")
		requests = flag.Int("requests", bench.DefaultWaiting.Requests, "concurrent requests")
		outage   = flag.Duration("outage", bench.DefaultWaiting.Outage, "how long the dependency answers 503")
		at       = flag.Duration("at", bench.DefaultWaiting.At, "when to measure, into the outage")
		deadline = flag.Duration("deadline", bench.DefaultWaiting.Deadline, "each request's deadline")
		explain  = flag.Bool("explain", true, "also dump a waiting request's stack and profile the heap, per library")
		out      = flag.String("o", "", "write the runs here, as JSON")
		md       = flag.String("md", "", "write the report here, as Markdown (default: the table on standard output)")
		from     = flag.String("from", "", "write the report from this JSON (-o) instead of measuring")

		child = flag.Bool("child", false, "run -lib once in this process and print its result as JSON")
		lib   = flag.String("lib", "", "the library of -child")
		mode  = flag.String("mode", "", "with -child: \"dump\" (the goroutines' stacks at the measurement, then SIGQUIT) or \"sites\" (the heap by allocation site)")
	)
	flag.Parse()
	w := bench.Waiting{Requests: *requests, Outage: *outage, At: *at, Deadline: *deadline}
	var err error
	switch {
	case *child:
		if err = runChild(w, *lib, *mode); errors.Is(err, bench.ErrLateMeasurement) {
			log.Print(err)
			os.Exit(exitLate)
		}
	case *from != "":
		var run bench.WaitRun
		if run, err = readRun(*from); err == nil {
			err = report(run, *md)
		}
	default:
		var run bench.WaitRun
		if run, err = measure(w, strings.Split(*libs, ","), *runs, *explain); err == nil {
			if *out != "" {
				err = writeRun(*out, run)
			}
			if err == nil {
				err = report(run, *md)
			}
		}
	}
	if err != nil {
		log.Fatal(err)
	}
}

// runChild runs w through lib and prints the result, or in mode "dump"
// makes the runtime dump every goroutine at the measurement, or in mode
// "sites" prints the heap the requests hold by allocation site.
func runChild(w bench.Waiting, name, mode string) error {
	lib, ok := bench.WaitLibByName(name)
	if !ok {
		return fmt.Errorf("no library %q (have %s)", name, strings.Join(bench.WaitLibNames(), ", "))
	}
	switch mode {
	case "":
	case "dump":
		w.Inspect = func() {
			// With GOTRACEBACK=system the runtime prints every goroutine,
			// each frame with its bounds, and exits.
			if err := quitSelf(); err != nil {
				log.Fatal(err)
			}
			select {}
		}
	case "sites":
		runtime.MemProfileRate = 1
		var base bench.HeapProfile
		w.Before = func() { base = bench.ReadHeapProfile() }
		w.Inspect = func() {
			sites := bench.ReadHeapProfile().Sites(base, w.Requests, 8)
			if err := json.NewEncoder(os.Stdout).Encode(sites); err != nil {
				log.Fatal(err)
			}
			os.Exit(0) // what follows the measurement does not matter here
		}
	default:
		return fmt.Errorf("-mode %q: want dump or sites", mode)
	}
	res, err := w.Run(lib)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// measure runs every library runs times, each run in a process of its own,
// then, if explain, looks at where their memory goes.
func measure(w bench.Waiting, libs []string, runs int, explain bool) (bench.WaitRun, error) {
	for _, l := range libs {
		if _, ok := bench.WaitLibByName(l); !ok {
			return bench.WaitRun{}, fmt.Errorf("no library %q (have %s)", l, strings.Join(bench.WaitLibNames(), ", "))
		}
	}
	run := bench.WaitRun{Meta: bench.WaitMeta{Waiting: w, Runs: runs, LoadBefore: bench.LoadAvg(),
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, CPU: bench.CPUModel(), Cores: runtime.NumCPU(),
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Libs: libs, SitesRequests: sitesRequests,
		Versions: bench.Modules("github.com/hashicorp/go-retryablehttp", "github.com/failsafe-go/failsafe-go",
			"github.com/PuerkitoBio/rehttp")}}
	for r := range runs {
		for i := range libs {
			l := libs[(i+r)%len(libs)]
			stdout, _, err := self(w, l, "", nil)
			for try := 1; try < 3 && exitCode(err) == exitLate; try++ {
				log.Printf("run %d, %s: the measurement came too late (a busy machine?); once more", r+1, l)
				stdout, _, err = self(w, l, "", nil)
			}
			if err != nil {
				return run, fmt.Errorf("run %d, %s: %w", r+1, l, err)
			}
			var res bench.WaitResult
			if err := json.Unmarshal(stdout, &res); err != nil {
				return run, fmt.Errorf("run %d, %s: %w", r+1, l, err)
			}
			log.Printf("run %d %-20s heap %6.0f B/req, stack %6.0f B/req, served %d of %d, all %v after the recovery",
				r+1, l, res.HeapPerRequest(), res.StackPerRequest(), res.Served, res.Requests, res.AllServed.Round(time.Millisecond))
			run.Results = append(run.Results, res)
		}
	}
	run.Meta.LoadAfter = bench.LoadAvg()
	if !explain {
		return run, nil
	}
	for _, l := range libs {
		e := bench.WaitExplain{Lib: l}
		// A few requests are enough for a stack: it does not depend on
		// how many wait.
		small := w
		small.Requests = 2
		_, stderr, err := self(small, l, "dump", []string{"GOTRACEBACK=system"})
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return run, fmt.Errorf("%s, dump: %w", l, err)
		}
		if e.Frames, err = bench.ParseWaitingStack(string(stderr), "bench.Waiting.Run.func1"); err != nil {
			return run, fmt.Errorf("%s, dump: %w", l, err)
		}
		small.Requests = sitesRequests
		stdout, _, err := self(small, l, "sites", nil)
		if err != nil {
			return run, fmt.Errorf("%s, heap profile: %w", l, err)
		}
		if err := json.Unmarshal(stdout, &e.Sites); err != nil {
			return run, fmt.Errorf("%s, heap profile: %w", l, err)
		}
		log.Printf("%-20s a waiting request's stack: %d B in %d frames; %d heap sites", l, bench.StackDepth(e.Frames), len(e.Frames), len(e.Sites))
		run.Explain = append(run.Explain, e)
	}
	return run, nil
}

// exitLate is a child's exit code when its measurement came too late
// (bench.ErrLateMeasurement).
const exitLate = 3

// exitCode returns the exit code of a child that failed with err, or 0.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return 0
}

// self runs this command again as a child for lib in mode, with env added
// to its environment, and returns its output.
func self(w bench.Waiting, lib, mode string, env []string) (stdout, stderr []byte, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(exe, "-child", "-lib", lib, "-mode", mode,
		"-requests", fmt.Sprint(w.Requests), "-outage", w.Outage.String(), "-at", w.At.String(), "-deadline", w.Deadline.String())
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if err != nil && mode != "dump" {
		os.Stderr.Write(e.Bytes())
	}
	return o.Bytes(), e.Bytes(), err
}

func writeRun(path string, run bench.WaitRun) error {
	b, err := json.MarshalIndent(run, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readRun(path string) (bench.WaitRun, error) {
	var run bench.WaitRun
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &run)
	}
	return run, err
}

// report writes run's report to md, or its table to standard output.
func report(run bench.WaitRun, md string) error {
	if md == "" {
		return bench.WriteWaitingTable(os.Stdout, bench.SummarizeWaiting(run.Results, run.Meta.Libs))
	}
	var b bytes.Buffer
	if err := bench.WriteWaitingReport(&b, run); err != nil {
		return err
	}
	return os.WriteFile(md, b.Bytes(), 0o644)
}
