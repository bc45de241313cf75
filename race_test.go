//go:build race

package retryhttp

// raceEnabled is true when the race detector runs, whose instrumentation
// allocates on its own.
const raceEnabled = true
