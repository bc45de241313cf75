//go:build !race

package retryhttp

const raceEnabled = false
