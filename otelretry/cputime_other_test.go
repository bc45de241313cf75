//go:build !unix

package otelretry

// cpuTime returns 0 where the process's CPU time is not at hand.
func cpuTime() int64 { return 0 }
