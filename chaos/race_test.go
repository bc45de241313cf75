//go:build race

package chaos

// raceEnabled is true when the race detector runs. It slows the clients
// enough to change what real-time faults do to them, so TestEverydayRealFaults
// -update refuses to write tables measured under it.
const raceEnabled = true
