package h3retry

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// test closes its servers and its clients' http3.Transports, which ends
// every QUIC connection and quic-go's goroutines with it.
func TestMain(m *testing.M) {
	// The test server's socket is wrapped (to drop and delay what it
	// sends), so quic-go cannot size its buffers, and would say so.
	os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	goleak.VerifyTestMain(m)
}
