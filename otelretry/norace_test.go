//go:build !race

package otelretry

const raceEnabled = false
