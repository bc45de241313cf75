// Command report writes BENCHMARKS.md from what the bench module's other
// commands wrote: the measured paths' samples (cmd/measure), the scenarios'
// runs (TestStorm, TestFleet, TestBlip, TestOverload with -scenarios.out),
// bench/WAITING.md (cmd/waiting), the output of the core's
// TestEverydayFaultsAnchors, chaos/README.md's tables of real faults, and
// bench/FLEET.txt. Its text is report.md.tmpl; it measures nothing itself.
// bench/run.sh runs it.
package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/template"
)

//go:embed report.md.tmpl
var reportTemplate string

// A report is what BENCHMARKS.md is made of.
type report struct {
	paths, scen results // the measured paths, and the scenarios

	// The text of the files the report copies from; empty if missing.
	waiting, everyday, anchorsOut, fleetTxt string

	// Where and how the run went, as run.sh passes it.
	Date, Go, CPU, Load, Modules, Rounds, Target, Count, Commands string
}

func main() {
	var r report
	samples := flag.String("samples", "", "the samples cmd/measure wrote")
	scenarios := flag.String("scenarios", "", "the scenarios' figures (-scenarios.out)")
	waiting := flag.String("waiting", "", "bench/WAITING.md")
	everyday := flag.String("everyday", "", "chaos/README.md")
	anchors := flag.String("anchors", "", "the output of the core's go test -run TestEverydayFaultsAnchors -faults.anchors -v")
	fleet := flag.String("fleet", "", "bench/FLEET.txt")
	modules := flag.String("modules", "", "a file listing the modules measured, one a line")
	commands := flag.String("commands", "", "a file holding the commands run")
	flag.StringVar(&r.Date, "date", "", "the date of the run")
	flag.StringVar(&r.Go, "go", "", "the Go version")
	flag.StringVar(&r.CPU, "cpu", "", "the machine's CPU and cores")
	flag.StringVar(&r.Load, "load", "", "the load averages at the start and end of the run")
	flag.StringVar(&r.Rounds, "rounds", "", "the rounds of the measured paths")
	flag.StringVar(&r.Target, "target", "", "the CPU time of each sample")
	flag.StringVar(&r.Count, "count", "", "the runs of each scenario")
	out := flag.String("o", "BENCHMARKS.md", "output file")
	flag.Parse()

	var err error
	if r.paths, err = readResults(*samples); err != nil {
		fail(err)
	}
	if r.scen, err = readResults(*scenarios); err != nil {
		fail(err)
	}
	r.waiting, r.everyday, r.anchorsOut, r.fleetTxt = read(*waiting), read(*everyday), read(*anchors), read(*fleet)
	r.Modules = strings.ReplaceAll(strings.TrimSpace(read(*modules)), "\n", "; ")
	r.Commands = wrapCommands(strings.TrimSpace(read(*commands)), 100)
	text, err := r.render()
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, text, 0o644); err != nil {
		fail(err)
	}
}

// render executes the report's template.
func (r *report) render() ([]byte, error) {
	t, err := template.New("report").Funcs(template.FuncMap{
		"targets":        r.targets,
		"pathTable":      r.pathTable,
		"loopbackTable":  r.loopbackTable,
		"scenarioTable":  r.scenarioTable,
		"waitingResults": r.waitingResults,
		"everydayTables": r.everydayTables,
		"anchors":        r.anchors,
		"fleet":          r.fleet,
	}).Parse(reportTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, r)
	return b.Bytes(), err
}

// fleet returns bench/FLEET.txt as a block of code, or a line saying it is
// missing.
func (r *report) fleet() string {
	if strings.TrimSpace(r.fleetTxt) == "" {
		return "*Not in this report: bench/FLEET.txt is missing (the command above writes it).*\n"
	}
	return "```\n" + strings.TrimRight(r.fleetTxt, "\n") + "\n```\n"
}

// read returns the text of the file at path, or "" if it cannot.
func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}
