package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The server side: a file server (http.ServeContent: Range, If-Range,
// Accept-Ranges: bytes) run by retryhttptest, whose script cuts its
// answers mid-way (Respond(d).CloseMidBody(n)).

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

// A download serves a payload of size bytes, its ETag "v1", through
// http.ServeContent, and records each request's Range. retryhttptest's
// CloseMidBody cuts it.
type download struct {
	size int64

	mu     sync.Mutex
	ranges []string
}

func (d *download) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.ranges = append(d.ranges, r.Header.Get("Range"))
	d.mu.Unlock()
	w.Header().Set("ETag", `"v1"`)
	http.ServeContent(w, r, "", time.Time{}, &payload{size: d.size})
}

// Ranges returns the Range of each request so far ("" for none).
func (d *download) Ranges() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ranges...)
}

// countingConn counts the bytes the client reads off the wire.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
