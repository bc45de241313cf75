package retryhttp

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// countedBody is a response body that counts its closes.
type countedBody struct {
	bytes.Reader
	closes int
}

func (b *countedBody) Close() error { b.closes++; return nil }

// Draining a failed attempt's body costs no allocation once the Transport
// has a cutter in its pool and its watch's heap has room: the drains share
// the watch's timer, and the reader that bounds the drain lives in the
// cutter. Each body is read to its end
// and closed once. (Not counted under the race detector.)
func TestDrainingAFailedBodyAllocatesNothing(t *testing.T) {
	tr := &Transport{}
	tr.init()
	payload := []byte(`{"error":{"type":"overloaded","message":"try again in a moment"}}`)
	body := &countedBody{}
	resp := &http.Response{StatusCode: 503, ContentLength: int64(len(payload))}
	drain := func() {
		body.Reset(payload)
		resp.Body = body
		tr.drainClose(resp, time.Minute)
	}
	drain() // fills the pool
	allocs := testing.AllocsPerRun(100, drain)
	if !raceEnabled { // (the race detector's sync.Pool drops items at random)
		assert.Zero(t, allocs, "allocations per drain")
	}
	assert.Zero(t, body.Len(), "the body was read to its end")
	assert.Equal(t, 102, body.closes, "each body closed once")
}
