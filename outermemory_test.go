package retryhttp_test

// A Transport remembers the idempotency keys it sent lately (to know a
// layer above's retry), at a fixed cost per key, whatever its length.

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A gateway forwarding its clients' keys, here of 1 MiB each, keeps none of
// them whole: 32 such requests leave the Transport holding far less than
// the 32 MiB of their keys.
func TestOuterMemoryDoesNotKeepLongKeysWhole(t *testing.T) {
	tr := &retryhttp.Transport{Base: testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return testutil.Response(req, http.StatusCreated, nil, "created"), nil
	})}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	for i := range 32 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://api.test/orders", nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", fmt.Sprint(i, strings.Repeat("k", 1<<20)))
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
	}

	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, held, int64(4<<20), "bytes the Transport holds")
	runtime.KeepAlive(tr)
}
