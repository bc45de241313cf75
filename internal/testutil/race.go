//go:build race

package testutil

// RaceEnabled is true when the race detector runs: its instrumentation
// allocates on its own, and slows every goroutine.
const RaceEnabled = true
