package retryhttp

// An upgraded connection (101 Switching Protocols) is the caller's to
// write to, whatever wraps the attempt that got it.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// echoUpgrade serves an upgrade to the "echo" protocol: after the 101 it
// sends back every line it reads.
func echoUpgrade(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "echo" {
		http.Error(w, "upgrade to echo", http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		rw.WriteString(line)
		rw.Flush()
	}
}

// A request that upgrades (101 Switching Protocols) gets a body it can
// write to, as net/http promises, through the body wrapper that
// AttemptTimeout puts on responses, and whether it may be hedged or not.
func TestAnUpgradedConnectionStaysWritable(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"plain", Policy{}},
		{"attempt timeout", Policy{AttemptTimeout: time.Minute}},
		{"attempt timeout of 100 ms", Policy{AttemptTimeout: 100 * time.Millisecond}},
		{"hedged", Policy{Hedge: &Hedge{After: time.Minute}}},
		{"hedged with attempt timeout", Policy{AttemptTimeout: time.Minute, Hedge: &Hedge{After: time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(echoUpgrade))
			defer srv.Close()
			base := testutil.LoopbackBase(t)
			req := testutil.NewRequest(t, http.MethodGet, srv.URL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")

			resp, err := (&Transport{Base: base, Policy: tc.p}).RoundTrip(req)

			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			rw, ok := resp.Body.(io.ReadWriteCloser)
			require.True(t, ok, "the body of a 101 is writable, got %T", resp.Body)
			_, err = io.WriteString(rw, "ping\n")
			require.NoError(t, err)
			line, err := bufio.NewReader(rw).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, "ping\n", line)
		})
	}
}
