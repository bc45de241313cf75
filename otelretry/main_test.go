package otelretry

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// instrumentation starts none, and every connection a test opens is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
