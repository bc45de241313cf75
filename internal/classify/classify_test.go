package classify

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzClassifyErrText checks how Of matches net/http's error
// texts: wherever the error sits in a chain, the verdict is the same, and
// never does part of a longer message match.
func FuzzClassifyErrText(f *testing.F) {
	for _, text := range []string{
		h2ForceClosed, h2ConnLost, h2NotEstablished, h2GracefulGoAway, h1ServerClosedIdle, h1TLSHandshakeTimeout,
		h2GoAwayFirstStream + "PROTOCOL_ERROR", h2GoAwayFirstStream + "HTTP_1_1_REQUIRED",
		h2GoAwayFirstStream + "unknown error code 0x2a",
		h2CannotRetry + "stream error: stream ID 1; REFUSED_STREAM; received from peer] after Request.Body was written",
		"EOF", "", "http2: client connection force closed via ClientConn.Close.",
	} {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		leaf := errors.New(text)
		want := Of(leaf)
		assert.Equal(t, want, Of(fmt.Errorf("round trip: %w", leaf)), "wrapped")
		assert.Equal(t, want, Of(errors.Join(errors.New("retryhttp test: other"), leaf)), "joined")
		_, ok := textFailure("retryhttp test: " + text)
		assert.False(t, ok, "part of a longer message")
	})
}
