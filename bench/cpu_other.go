//go:build !unix

package bench

import (
	"errors"
	"time"
)

// cpuTime reports that the process's CPU time is not measured here: only
// Unix systems have getrusage.
func cpuTime() (time.Duration, error) {
	return 0, errors.New("bench: the process's CPU time is measured on Unix systems only")
}
