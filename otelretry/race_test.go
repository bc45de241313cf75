//go:build race

package otelretry

// raceEnabled is true when the race detector runs, under which sync.Pool
// drops items at random: allocation counts are not exact.
const raceEnabled = true
