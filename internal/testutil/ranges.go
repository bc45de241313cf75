package testutil

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// A Download serves one body through http.ServeContent (Range, If-Range,
// Accept-Ranges: bytes, as a file server does), and cuts the connection of
// its answers after the bytes Cuts lists: answer i (from 0) breaks after
// Cuts[i] bytes of its body, if i < len(Cuts). It records what each request
// asked for, and counts the body bytes it wrote.
type Download struct {
	Body []byte
	Cuts []int64

	// ETag returns the ETag of answer i, quoted ("" for none, W/"x" weak);
	// nil means "v1" for all.
	ETag func(i int) string
	// IgnoreRange answers every request 200 with the whole body, as a
	// server that does not serve ranges but claims to.
	IgnoreRange bool
	// Modified, if set, is sent as Last-Modified, the Date a minute later.
	Modified time.Time

	mu      sync.Mutex
	asked   []http.Header // each request's Range and If-Range
	written int64
}

// ServeHTTP answers the next request.
func (d *Download) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	i := len(d.asked)
	d.asked = append(d.asked, http.Header{"Range": r.Header.Values("Range"), "If-Range": r.Header.Values("If-Range")})
	d.mu.Unlock()
	etag := `"v1"`
	if d.ETag != nil {
		etag = d.ETag(i)
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if !d.Modified.IsZero() {
		w.Header().Set("Date", d.Modified.Add(time.Minute).UTC().Format(http.TimeFormat))
	}
	cw := &cutWriter{ResponseWriter: w, d: d, left: -1}
	if i < len(d.Cuts) {
		cw.left = d.Cuts[i]
	}
	if d.IgnoreRange {
		r.Header.Del("Range")
		w.Header().Set("Accept-Ranges", "bytes")
	}
	http.ServeContent(cw, r, "", d.Modified, bytes.NewReader(d.Body))
}

// Asked returns the Range and If-Range of each request so far.
func (d *Download) Asked() []http.Header {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]http.Header(nil), d.asked...)
}

// Written returns the body bytes handed to the connections so far, in all
// answers.
func (d *Download) Written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.written
}

// cutWriter counts the body bytes written, and breaks the connection after
// left of them (never, if negative).
type cutWriter struct {
	http.ResponseWriter
	d    *Download
	left int64
}

func (w *cutWriter) Write(p []byte) (int, error) {
	cut := w.left >= 0 && int64(len(p)) >= w.left
	if cut {
		p = p[:w.left]
	}
	// Counted before they go: a client may read the last bytes, and its
	// test look at the count, before Write returns.
	w.d.mu.Lock()
	w.d.written += int64(len(p))
	w.d.mu.Unlock()
	n, err := w.ResponseWriter.Write(p)
	w.left -= int64(n)
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
