package retryhttptest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// closed Server must leave none behind, whatever its steps were doing.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
