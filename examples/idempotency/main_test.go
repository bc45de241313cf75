package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestExampleRuns runs the example as `go run` would. The program checks
// its own results and exits 1 when one is wrong, which fails this test.
func TestExampleRuns(t *testing.T) {
	defer goleak.VerifyNone(t)
	main()
}
