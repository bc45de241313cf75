package sim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// simulation's bubbles, and every attempt, wait and drain their Transports
// start, must end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
