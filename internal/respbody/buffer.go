package respbody

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
)

// Buffer reads resp's body into memory, up to limit bytes, so that a
// body cut off or stalled fails the attempt rather than the caller's read.
// It reports whether the whole body is now in memory; a longer body (by its
// Content-Length, or found longer while read) is given back as it streams,
// the bytes read first from memory. On error the body has been closed.
// Memory grows with the bytes read, not with the Content-Length promised.
// The reads end by ctx's end (see Guard).
func Buffer(ctx context.Context, resp *http.Response, limit int64) (whole bool, err error) {
	if resp.Body == http.NoBody {
		return true, nil
	}
	if noContent(resp) {
		// Its Content-Length, if any, is what a GET would have got: there
		// is nothing to read, and nothing to check (RFC 9110, 6.4.1).
		resp.Body.Close()
		resp.Body = http.NoBody
		return true, nil
	}
	cl := resp.ContentLength
	if cl > limit {
		return false, nil
	}
	body := NewGuard(ctx, resp.Body)
	defer body.Stop()
	// One byte more than expected finds a longer body.
	expect := limit
	if cl >= 0 {
		expect = cl
	}
	buf, err := readUpTo(body, expect+min(1, math.MaxInt64-expect), cl)
	n := int64(len(buf))
	if err == io.ErrUnexpectedEOF && cl >= 0 && n <= cl {
		err = nil // a short body: told by its length, below
	}
	switch {
	case err != nil:
	case cl >= 0 && n > cl:
		err = fmt.Errorf("body longer than its Content-Length %d", cl)
	case cl >= 0 && n < cl:
		err = fmt.Errorf("body of %d bytes, Content-Length %d: %w", n, cl, io.ErrUnexpectedEOF)
	case n > limit:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), body), body}
		return false, nil
	}
	if err != nil {
		body.Close()
		return false, fmt.Errorf("retryhttp: reading response body: %w", err)
	}
	body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return true, nil
}

// noContent reports whether resp has no content by its request's method
// or its status: the answer to a HEAD, a 1xx, 204 or 304.
func noContent(resp *http.Response) bool {
	code := resp.StatusCode
	return resp.Request != nil && resp.Request.Method == http.MethodHead ||
		code >= 100 && code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
}

// readUpTo reads r until its end, or until it has read most bytes. It
// starts with room for hint+1 bytes (a body's Content-Length, or -1 when
// unknown: 512), at most readStart, and doubles the room as bytes fill it,
// never past most.
func readUpTo(r io.Reader, most, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		size = min(hint, readStart-1) + 1
	}
	buf := make([]byte, 0, min(size, most))
	for int64(len(buf)) < most {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), most-int64(len(buf))))) // doubles
		}
		n, err := r.Read(buf[len(buf):min(int64(cap(buf)), most)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// readStart is the most room readUpTo makes before any byte is read.
const readStart = 64 << 10
