package header

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The names the scan of a header looks for, each with a value a retry's
// decisions read, and names it must pass over (some of the same lengths).
var (
	retryFieldNames = []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After", "Retry-After",
		"Ratelimit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Should-Retry", "Stripe-Should-Retry",
		"X-Envoy-Overloaded"}
	otherFieldNames = []string{"Content-Type", "Date", "Server", "X-Request-Id", "Content-Length", "Etag",
		"Retry-after", "retry-after", "RateLimit", "X-Ratelimit-Limit", "Cache-Control", "X-Should-Retrx",
		"Content-Encoding", "X-Envoy-Upstream-X"}
	fieldValues = []string{"", "0", "1", "2", "250", "true", "false", " FALSE ", "x", "1.5",
		"Wed, 21 Oct 2015 07:28:00 GMT", `"default";r=0;t=30`, `"a";r=1;t=5, "b";r=0;t=7`, "4102444800", "-1"}
)

// fuzzHeader builds a header from b: each pair of bytes picks a name (one
// a retry's decisions read, or another) and a value, and a byte may leave a
// name with no value at all.
func fuzzHeader(b []byte) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(b); i += 2 {
		names := otherFieldNames
		if b[i]&1 == 0 {
			names = retryFieldNames
		}
		name := names[int(b[i]>>1)%len(names)]
		if b[i+1] == 0xff {
			h[name] = nil
			continue
		}
		h[name] = append(h[name], fieldValues[int(b[i+1])%len(fieldValues)])
	}
	return h
}

// A header's scan finds every field a retry's decisions read: the wait, the
// server's verdict, a spent rate limit and Envoy's overload are the same
// from the fields it found as from a lookup of each (allFields), for any
// header, scanned (up to maxScan fields) or too long to scan.
func FuzzRetryFields(f *testing.F) {
	f.Add([]byte{0, 3, 1, 0})
	f.Add([]byte{6, 4, 2, 11, 14, 5, 16, 6, 18, 0})
	f.Add([]byte{10, 12, 12, 13, 0, 0xff, 8, 2})
	f.Add([]byte(strings.Repeat("\x01\x02\x03\x04\x05\x06", 6) + "\x06\x03"))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		h := fuzzHeader(b)
		fs := Scan(h)
		if len(h) > maxScan {
			assert.Equal(t, allFields, fs)
		}
		for i, name := range retryFieldNames {
			_, present := h[name]
			assert.Equal(t, present || len(h) > maxScan, fs&(1<<i) != 0, "%s in %v", name, h)
		}
		d1, s1, ok1 := Wait(h, fs, now)
		d2, s2, ok2 := Wait(h, allFields, now)
		assert.Equal(t, []any{d2, s2, ok2}, []any{d1, s1, ok1}, "the wait of %v", h)
		assert.Equal(t, ShouldRetry(h, allFields), ShouldRetry(h, fs), "the verdict of %v", h)
		assert.Equal(t, RateLimited(h, allFields), RateLimited(h, fs), "the rate limit of %v", h)
		envoy := fs&EnvoyOverloaded != 0 && Value(h, "X-Envoy-Overloaded") != ""
		assert.Equal(t, Value(h, "X-Envoy-Overloaded") != "", envoy, "overloaded in %v", h)
	})
}

// waitOf is the wait h asks for as the Transport reads it: its fields
// found by a scan.
func waitOf(h http.Header, now time.Time) (time.Duration, Kind, bool) {
	return Wait(h, Scan(h), now)
}

// adviceIn is the server's advice in h as the Transport reads it.
func adviceIn(h http.Header) Advice { return ShouldRetry(h, Scan(h)) }

// otherHeader returns a header of n fields, none of them one a retry's
// decisions read.
func otherHeader(n int) http.Header {
	h := http.Header{}
	for i := range n {
		h["X-Other-"+strconv.Itoa(i)] = []string{"v"}
	}
	return h
}

// A header of up to maxScan fields is scanned: the scan finds just the
// fields present. A longer one is not: every field is to be looked up.
func TestScanUpToMaxScanFields(t *testing.T) {
	h := otherHeader(maxScan - 1)
	h["Retry-After"] = []string{"7"}
	assert.Equal(t, fScanned|fRetryAfter, Scan(h), "maxScan fields")
	h["X-Other-Last"] = []string{"v"}
	assert.Equal(t, allFields, Scan(h), "maxScan+1 fields")
	assert.Equal(t, fScanned, Scan(otherHeader(maxScan)), "maxScan fields, none read")
	assert.Equal(t, fScanned, Scan(nil), "no header")
}

// Fields.Of scans a header once: a zero Fields takes the scan's result,
// which later calls return without another scan.
func TestFieldsOfKeepsTheFirstScan(t *testing.T) {
	var f Fields
	h := http.Header{"Retry-After": {"7"}, "X-Should-Retry": {"true"}}
	assert.Equal(t, Scan(h), f.Of(h))
	assert.Equal(t, Scan(h), f, "kept")
	assert.Equal(t, Scan(h), f.Of(http.Header{"Ratelimit": {`"d";r=0;t=5`}}), "scanned already")
	var g Fields
	assert.Equal(t, fScanned, g.Of(nil), "an empty header is scanned too")
	assert.Equal(t, fScanned, g.Of(h), "and its scan kept")
}
