package main

import (
	"os"
	"strings"
)

// fleetCmd writes bench/FLEET.txt: a fleet of 20 OS processes on loopback
// held against examples/herd's simulation of it.
const fleetCmd = "go run ./examples/herd -fleet 20 -fleet-runs 3 -real > bench/FLEET.txt"

// fleet writes the section on a real fleet, from bench/FLEET.txt (read
// from path) as the herd printed it.
func (r *report) fleet(path string) {
	r.p("## A real fleet against its simulation\n\n")
	r.prose(`examples/herd simulates fleets on a virtual clock, with real Transports. Is the simulation
right? Twenty OS processes, each one Transport with the default budget at 12 GETs a second,
send to one loopback server through a 10 s outage, three times; the same fleet runs on the
virtual clock with seeds 1 to 3. Two figures are held against each other: the attempts per
request started in the outage, and the busiest 100 ms at its onset. From the repository's
root, about 90 s (` + "`go test ./examples/herd -run TestTheRealFleetMatchesTheSimulation -v -fleet.real`" + `
checks the same):`)
	r.p("```\n%s\n```\n\n", fleetCmd)
	text, err := os.ReadFile(path)
	if err != nil || path == "" {
		r.prose("Not in this report (%s): the command above writes it.", orNone(path))
		return
	}
	r.p("```\n%s\n```\n\n", strings.TrimRight(string(text), "\n"))
}
