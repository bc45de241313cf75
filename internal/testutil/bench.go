package testutil

import (
	"net/http"
	"testing"
)

// BenchRoundTrip sends req through rt on each iteration of b's loop, after
// calling before (nil: nothing), fails b on an error or an answer other
// than 200, and closes each answer's body unread. It reports allocations.
func BenchRoundTrip(b *testing.B, rt http.RoundTripper, req *http.Request, before func()) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		if before != nil {
			before()
		}
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatal(resp, err)
		}
		resp.Body.Close()
	}
}
