package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A profile is what cmd/profile found in the CPU profile of one case:
// the shares of its samples by whose code ran them, and the leaf frames of
// retryhttp's share, the most flat time first, all in % of the samples.
type profile struct {
	sampledMs float64            // of samples in all: a tenth of them, at runtime/pprof's 100 a second
	shares    map[string]float64 // "retryhttp", "bench", "neither"
	frames    []profFrame
}

// A profFrame is a leaf function of retryhttp's share and its flat time;
// for another package's function, the retryhttp function viaPct % of it
// came through.
type profFrame struct {
	name        string
	pct, viaPct float64
	via         string
}

// profiles maps a case ("GET/resp=realistic/lib=retryhttp") to its profile.
type profiles map[string]*profile

// parseProfiles reads the blocks cmd/profile wrote; a path of "" reads
// none.
func parseProfiles(path string) (profiles, error) {
	ps := profiles{}
	if path == "" {
		return ps, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cur *profile
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		bad := func(err error) error { return fmt.Errorf("%s:%d: %q: %v", path, line, text, err) }
		if name, ok := strings.CutPrefix(fields[0], "case "); ok {
			cur = &profile{shares: map[string]float64{}}
			ps[name] = cur
			for _, kv := range fields[1:] {
				if v, ok := strings.CutPrefix(kv, "sampled-ms "); ok {
					if cur.sampledMs, err = strconv.ParseFloat(v, 64); err != nil {
						return nil, bad(err)
					}
				}
			}
			continue
		}
		if cur == nil {
			return nil, bad(fmt.Errorf("before any case"))
		}
		switch {
		case fields[0] == "share" && len(fields) == 3:
			v, err := strconv.ParseFloat(fields[2], 64)
			if err != nil {
				return nil, bad(err)
			}
			cur.shares[fields[1]] = v
		case fields[0] == "frame" && (len(fields) == 3 || len(fields) == 5):
			fr := profFrame{name: fields[2]}
			if fr.pct, err = strconv.ParseFloat(fields[1], 64); err != nil {
				return nil, bad(err)
			}
			if len(fields) == 5 {
				if fr.viaPct, err = strconv.ParseFloat(fields[3], 64); err != nil {
					return nil, bad(err)
				}
				fr.via = fields[4]
			}
			cur.frames = append(cur.frames, fr)
		default:
			return nil, bad(fmt.Errorf("want a case, share or frame line"))
		}
	}
	return ps, sc.Err()
}

// profileTop is how many frames the report lists per profile.
const profileTop = 5

// shortFrame drops the module's host from a function's name:
// "retryhttp.(*Transport).RoundTrip", "retryhttp/internal/clock.Real.Now".
func shortFrame(name string) string { return strings.TrimPrefix(name, "github.com/retryhttp/") }

// pct formats a percentage of a profile's samples: whole from 10 up (and
// 0), else to a tenth.
func pct(v float64) string {
	if v >= 9.95 || v == 0 {
		return fmt.Sprintf("%.0f %%", v)
	}
	return fmt.Sprintf("%.1f %%", v)
}

// profileNote writes, for each of libs that has a profile on path's
// realistic answers, a paragraph under the path's table: how its samples
// divide between retryhttp, the bench and neither, and the top frames of
// retryhttp's share by flat time.
func (r *report) profileNote(path string, libs ...string) {
	for _, lib := range libs {
		p := r.prof[variant(path, realistic)+"/lib="+lib]
		if p == nil {
			continue
		}
		var top []string
		for _, f := range p.frames[:min(len(p.frames), profileTop)] {
			s := "`" + shortFrame(f.name) + "` " + pct(f.pct)
			switch {
			case f.via == "":
			case f.viaPct >= 99.5:
				s += " (from `" + shortFrame(f.via) + "`)"
			default:
				s += fmt.Sprintf(" (%.0f %% of it from `%s`)", f.viaPct, shortFrame(f.via))
			}
			top = append(top, s)
		}
		frames := "Its top frame by flat time"
		if len(top) != 1 {
			frames = fmt.Sprintf("Its top %d frames by flat time", len(top))
		}
		frames += ", in % of all the samples: " + strings.Join(top, ", ")
		if len(top) == 0 {
			frames = "No frame of its own had a sample"
		}
		text := fmt.Sprintf("*Where %s's time goes* (a CPU profile of its row, realistic answers, %.0f samples): "+
			"%s in its code and what it calls, %s in the bench's base and caller, %s in neither "+
			"(GC workers, scheduler). %s.",
			lib, p.sampledMs/10, pct(p.shares["retryhttp"]), pct(p.shares["bench"]), pct(p.shares["neither"]), frames)
		// A figure and its % sign stay on one line.
		const glue = "\x1f"
		text = wrap(strings.ReplaceAll(text, " %", glue+"%"), 96, "")
		r.p("%s\n\n", strings.ReplaceAll(text, glue, " "))
	}
}

// profileMethod writes the method of the profiles, if the run took any.
func (r *report) profileMethod() {
	if len(r.prof) == 0 {
		return
	}
	r.p(`### CPU profiles: where retryhttp's time goes

Under the tables of the in-memory paths, a CPU profile of retryhttp's row on realistic answers
(` + "`bench/cmd/profile`" + `, after the measured rounds): the same case, warmed up and run alone
with the same GOMAXPROCS for a few seconds of CPU time, sampled 100 times a second. Each sample
is a call stack; the first frame of this repository's module from the leaf up says whose work
it is: retryhttp's (its package and internal packages, with the runtime and standard library
functions they call), the bench's (the in-memory base, the caller reading the answer, the loop;
retryhttp's reads of the base's bodies count as the base's), or neither (the garbage
collector's background workers, the scheduler). The frames listed are the leaf functions of
retryhttp's share with the most samples (flat time), in %% of all the samples, each of
another package named with the retryhttp function its samples came through. A sample on
` + "`runtime.asyncPreempt`" + ` counts for the function it interrupted: the profiler's signal
lands there on 2 to 4 %% of the GET path's samples, though the path runs no faster with
asynchronous preemption off. With a few hundred samples a frame's share is known to about
±1.5 points: frames a point or two apart may swap places from run to run. The profiles stay in
` + "`bench/results/profiles/`" + ` (` + "`go tool pprof -top`" + ` one of them to see every frame).

`)
}
