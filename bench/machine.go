package bench

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
)

// What the reports say of the machine and the code they measured.

// LoadAvg returns the machine's load averages over 1, 5 and 15 minutes,
// or "unknown".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// CPUModel returns the model name of the machine's CPU, or "unknown".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// Modules names the code measured: retryhttp's revision in this tree, and
// the version of each of the modules given that the binary was built with.
func Modules(peers ...string) string {
	rev := "unknown"
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	list := []string{"github.com/retryhttp/retryhttp " + rev + " (this tree)"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			for _, p := range peers {
				if d.Path == p {
					list = append(list, d.Path+" "+d.Version)
				}
			}
		}
	}
	return strings.Join(list, "; ")
}
