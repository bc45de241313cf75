package sdk

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine of the SDKs, the transports or
// the fake services outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
