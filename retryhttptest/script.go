package retryhttptest

import "slices"

// A Script is the steps a server (or one of its routes) plays, one per
// request, in the order the requests arrive. Make one with Sequence or
// Cycle. A Script is a value: each server and route that plays it keeps
// its own position, so one Script may serve several of them.
//
// The zero Script, like a Script of no steps, answers every request with
// the zero Step: 200 OK with an empty body.
type Script struct {
	steps []Step
	cycle bool
}

// Sequence returns a script that answers the i-th request with the i-th
// step, and every request after the last step with the last step again:
// Sequence(Status(503), Status(503), Status(200)) fails twice, then
// succeeds for good.
func Sequence(steps ...Step) Script {
	return Script{steps: slices.Clone(steps)}
}

// Cycle returns a script that plays its steps in order and then starts
// again from the first: Cycle(Status(503), Status(200)) fails every other
// request.
func Cycle(steps ...Step) Script {
	return Script{steps: slices.Clone(steps), cycle: true}
}

// step returns the index and step that answer the n-th request (0 for the
// first).
func (s *Script) step(n int) (int, Step) {
	if len(s.steps) == 0 {
		return 0, Step{}
	}
	i := n
	if i >= len(s.steps) {
		if s.cycle {
			i %= len(s.steps)
		} else {
			i = len(s.steps) - 1
		}
	}
	return i, s.steps[i]
}

// player plays a script: it holds the number of requests answered so far.
// Its fields are guarded by the Server's mutex.
type player struct {
	script  Script
	pattern string // "" for the server's own script
	n       int
}

func (p *player) next() (int, Step) {
	i, s := p.script.step(p.n)
	p.n++
	return i, s
}
