package retryhttp

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// attempt, wait and connection a Transport starts must end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
