package main

import (
	"crypto/sha256"
	"io"
	"testing"
)

// A small download through the three clients: each meets the 5 cuts and
// reads the body whole; the resumed one is sent once, the others' attempts
// each one cut further.
func TestEachClientReadsTheBodyWhole(t *testing.T) {
	const size, ncuts = 4 << 20, 5
	h := sha256.New()
	if _, err := io.Copy(h, &payload{size: size}); err != nil {
		t.Fatal(err)
	}
	want := h.Sum(nil)
	for i, c := range clientsFor(ncuts, 8<<20) {
		s := run(c, size, size/(ncuts+1), ncuts, want)
		if !s.ok || s.requests != ncuts+1 {
			t.Errorf("%s: %d requests, SHA-256 right %v (%s)", c.name, s.requests, s.ok, s.note)
		}
		if wire := []float64{1, 3.5, 3.5}[i]; s.wire < wire-0.01 || s.wire > wire+0.01 {
			t.Errorf("%s: %.3fx the body over the wire, want %.1fx", c.name, s.wire, wire)
		}
	}
}

// The payload reads the same from any offset.
func TestPayloadSeeks(t *testing.T) {
	all, _ := io.ReadAll(&payload{size: 1000})
	p := &payload{size: 1000}
	for _, at := range []int64{0, 3, 8, 13, 999} {
		if _, err := p.Seek(at, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 11)
		n, _ := p.Read(b)
		if string(b[:n]) != string(all[at:min(at+11, 1000)]) {
			t.Errorf("at %d: %x, want %x", at, b[:n], all[at:min(at+11, 1000)])
		}
	}
}
