package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// The server side: a file server (http.ServeContent: Range, If-Range,
// Accept-Ranges: bytes) whose answers break after the bytes the cuts list.
// It works as the core's testutil.Download does; bench/ is held to the
// core's public API (TestCompanionsAndExamplesUseThePublicAPI), so it is
// written again here.

// payload is size bytes of deterministic noise, generated as they are read
// (word i is splitmix64(i)), so that neither side holds the body in memory:
// a body that dropped, repeated or reordered any part of it would hash
// differently.
type payload struct {
	size int64
	off  int64
}

func (p *payload) Read(b []byte) (int, error) {
	if p.off >= p.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.size-p.off)]
	var w [8]byte
	for i := 0; i < len(b); {
		binary.LittleEndian.PutUint64(w[:], splitmix64(uint64(p.off)/8))
		n := copy(b[i:], w[p.off%8:])
		i += n
		p.off += int64(n)
	}
	return len(b), nil
}

func (p *payload) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += p.off
	case io.SeekEnd:
		offset += p.size
	}
	if offset < 0 {
		return 0, errors.New("seek before the start")
	}
	p.off = offset
	return offset, nil
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// A download serves a payload of size bytes, its ETag "v1", and breaks
// answer i (from 0) after cuts[i] bytes of its body, if i < len(cuts). It
// records each request's Range and counts the body bytes it wrote.
type download struct {
	size int64
	cuts []int64

	mu      sync.Mutex
	ranges  []string
	written int64
}

func (d *download) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	i := len(d.ranges)
	d.ranges = append(d.ranges, r.Header.Get("Range"))
	d.mu.Unlock()
	w.Header().Set("ETag", `"v1"`)
	cw := &cutWriter{ResponseWriter: w, d: d, left: -1}
	if i < len(d.cuts) {
		cw.left = d.cuts[i]
	}
	http.ServeContent(cw, r, "", time.Time{}, &payload{size: d.size})
}

// Ranges returns the Range of each request so far ("" for none).
func (d *download) Ranges() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ranges...)
}

// Written returns the body bytes written so far, in all answers.
func (d *download) Written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

// cutWriter counts the body bytes written, and breaks the connection after
// left of them (never, if negative).
type cutWriter struct {
	http.ResponseWriter
	d    *download
	left int64
}

func (w *cutWriter) Write(p []byte) (int, error) {
	cut := w.left >= 0 && int64(len(p)) >= w.left
	if cut {
		p = p[:w.left]
	}
	n, err := w.ResponseWriter.Write(p)
	w.left -= int64(n)
	w.d.mu.Lock()
	w.d.written += int64(n)
	w.d.mu.Unlock()
	if cut {
		http.NewResponseController(w.ResponseWriter).Flush()
		panic(http.ErrAbortHandler) // the server closes the connection: the body ends short
	}
	return n, err
}

// ReadFrom hides the ResponseWriter's, so that every byte goes through Write.
func (w *cutWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w}, r)
}
