//go:build !race

package testutil

// RaceEnabled is true when the race detector runs.
const RaceEnabled = false
