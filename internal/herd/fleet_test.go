package main

import (
	"bytes"
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var realFleet = flag.Bool("fleet.real", false, "also run TestTheRealFleetMatchesTheSimulation: 3 runs of 20 OS processes, about 90 s")

// The figures come from the arrivals as the doc says: a request counts in
// the outage by its first attempt, with all its attempts; the busiest
// 100 ms counts every arrival, in windows that start in the outage's first
// 2 s.
func TestFleetFiguresComeFromTheArrivals(t *testing.T) {
	f := fleet{Clients: 10, Rate: 10, Before: time.Second, Outage: 5 * time.Second, After: time.Second}
	var a arrivals
	ms := time.Millisecond
	a.add("0-0", 900*ms)  // before: not counted
	a.add("0-0", 1090*ms) // its retry, in the outage: in the busiest window
	a.add("0-1", 1000*ms) // in the outage, 3 attempts
	a.add("0-1", 1050*ms) //
	a.add("0-1", 6500*ms) // after it
	a.add("1-0", 3000*ms) // in the outage, 1 attempt, alone in its window
	fig := a.figures(f)
	assert.Equal(t, fleetFigures{Requests: 2, Attempts: 4, Peak: 3, Offered: 10}, fig)
	assert.Equal(t, 2.0, fig.PerRequest())
}

// Each client sends at its rate for the fleet's span, its phase a share of
// the first gap.
func TestAFleetsClientsSendEvenly(t *testing.T) {
	f := fleet{Clients: 4, Rate: 10, After: time.Second}
	assert.Len(t, f.sendsAt(0), 10)
	assert.Equal(t, 25*time.Millisecond, f.sendsAt(1)[0])
	assert.Equal(t, 125*time.Millisecond, f.sendsAt(1)[1])
}

// The simulated fleet: a seed gives one result. Its figures say what the
// budget does to a fleet whose clients each send 12 a second, nothing in
// flight between two requests: each client's first request to fail is
// alone, and makes its 4 attempts (the onset's busiest 100 ms about twice
// what is offered); each later one waits in line, on the evidence of the
// first's failures, for as long as its schedule lasts (0.7 s), and ends
// then, the 10 s outage far from over: about one attempt a request.
func TestTheSimulatedFleet(t *testing.T) {
	f := theFleet(20)
	a, b := simulateFleet(f, 1), simulateFleet(f, 1)
	assert.Equal(t, a, b, "a seed gives one result")
	assert.Equal(t, 20*12*10, a.Requests, "the requests started in the outage")
	assert.InDelta(t, 1.08, a.PerRequest(), 0.05)
	assert.LessOrEqual(t, a.PerRequest(), 1.30)
	assert.Equal(t, 24, a.Offered)
	assert.GreaterOrEqual(t, a.Peak, a.Offered+20, "each client's first retry")
	assert.LessOrEqual(t, a.Peak, 2*a.Offered+5)
}

// The real fleet, 20 OS processes against a loopback server, three times:
// its medians are within 10 % of the simulation's, so that the simulation
// stands for a real fleet. Run with
//
//	go test ./internal/herd -run TestTheRealFleetMatchesTheSimulation -v -fleet.real
func TestTheRealFleetMatchesTheSimulation(t *testing.T) {
	if !*realFleet {
		t.Skip("runs 20 OS processes for about 90 s: -fleet.real")
	}
	exe := filepath.Join(t.TempDir(), "herd")
	build := exec.Command("go", "build", "-o", exe, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var buf bytes.Buffer
	require.NoError(t, runFleetWith(&buf, fleetFlags{clients: 20, runs: 3, real: true}, exe))
	t.Logf("\n%s", buf.String())
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(line, "attempts per request") || strings.HasPrefix(line, "busiest 100 ms") {
			assert.True(t, strings.HasSuffix(line, "yes"), "within 10 %%: %s", line)
		}
	}
}
