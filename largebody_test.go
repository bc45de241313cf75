package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBase answers 503 to its first request and 200 to the others,
// after reading each request's body to its end; it records the length of
// each body it read.
type countingBase struct{ read []int64 }

func (b *countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n, err := io.Copy(io.Discard, req.Body) // bytes.Reader writes itself: no buffer
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	b.read = append(b.read, n)
	code := http.StatusOK
	if len(b.read) == 1 {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// A 64 MiB PUT is sent, and sent again after a 503, from the caller's own
// bytes: the Transport re-creates the body through GetBody and copies none
// of it. Both attempts carry the whole body.
func TestA64MiBPutCopiesNothing(t *testing.T) {
	const size = 64 << 20
	payload := make([]byte, size)
	base := &countingBase{}
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}, Budget: UnlimitedBudget()}
	req, err := http.NewRequest(http.MethodPut, "http://api.test/blob", bytes.NewReader(payload))
	require.NoError(t, err)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := tr.RoundTrip(req)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	resp.Body.Close()

	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []int64{size, size}, base.read, "each attempt sent the whole body")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated for a 64 MiB PUT and its retry")
}
