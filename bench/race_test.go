//go:build race

package bench

// raceEnabled is true when the race detector runs, whose instrumentation
// allocates on its own.
const raceEnabled = true
