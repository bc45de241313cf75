package testutil

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing/iotest"
	"time"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A Download serves one body through http.ServeContent (Range, If-Range,
// Accept-Ranges: bytes, as a file server does). It records what each
// request asked for, and counts the body bytes it read to send. Cut
// makes a script of it whose answers break mid-way.
type Download struct {
	Body []byte

	// ETag returns the ETag of answer i, quoted ("" for none, W/"x" weak);
	// nil means "v1" for all.
	ETag func(i int) string
	// IgnoreRange answers every request 200 with the whole body, as a
	// server that does not serve ranges but claims to.
	IgnoreRange bool
	// Modified, if set, is sent as Last-Modified, the Date a minute later.
	Modified time.Time

	mu    sync.Mutex
	asked []http.Header // each request's Range and If-Range
	read  int64
}

// Cut returns a script that serves d, answer i (from 0) cut after cuts[i]
// bytes of its body (retryhttptest's CloseMidBody), the answers after the
// last cut whole.
func (d *Download) Cut(cuts ...int) retryhttptest.Script {
	steps := make([]retryhttptest.Step, 0, len(cuts)+1)
	for _, n := range cuts {
		steps = append(steps, retryhttptest.Respond(d).CloseMidBody(n))
	}
	return retryhttptest.Sequence(append(steps, retryhttptest.Respond(d))...)
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
	if d.IgnoreRange {
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "", d.Modified, &countedReader{ReadSeeker: bytes.NewReader(d.Body), d: d})
}

// Asked returns the Range and If-Range of each request so far.
func (d *Download) Asked() []http.Header {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]http.Header(nil), d.asked...)
}

// Written returns the body bytes read to be sent so far, in all answers:
// those sent, and of a cut answer up to 32 KiB more (http.ServeContent
// copies in 32 KiB pieces).
func (d *Download) Written() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.read
}

// countedReader counts the bytes read from it into its Download.
type countedReader struct {
	io.ReadSeeker
	d *Download
}

func (r *countedReader) Read(p []byte) (int, error) {
	n, err := r.ReadSeeker.Read(p)
	r.d.mu.Lock()
	r.d.read += int64(n)
	r.d.mu.Unlock()
	return n, err
}

// CutOnce answers a GET of body as a file server would, resumably (ETag
// "v1", Accept-Ranges: bytes): its first call with a 200 whose body breaks
// with a reset after cut bytes, and each later call with the rest from the
// offset its Range asks (a 206).
func CutOnce(body []byte, cut int) Answer {
	return func(n int, req *http.Request) (*http.Response, error) {
		h := http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}
		if n == 1 {
			resp := Response(req, http.StatusOK, h, "")
			resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:cut]), iotest.ErrReader(ErrReset())))
			resp.ContentLength = int64(len(body))
			return resp, nil
		}
		var from int
		fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-", &from)
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(body)-1, len(body)))
		return Response(req, http.StatusPartialContent, h, string(body[from:])), nil
	}
}
