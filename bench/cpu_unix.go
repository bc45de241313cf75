//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used so far, user and
// system, in all its threads (getrusage with RUSAGE_SELF).
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
