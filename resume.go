package retryhttp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// resumable is a response body that continues where it broke
// (Policy.ResumeResponse): the call's loop sends a retry that asks for the
// rest with Range and If-Range (RFC 9110, 14.2 and 13.1.5), whose 206
// continues the body.
type resumable struct {
	c         *call              // the request, moved off RoundTrip's stack, whose attempts continue the body
	cancel    context.CancelFunc // ends the context of the attempts that resume it (c.parent)
	n         int                // the number of the attempt whose body is read (a hedge's may be 1)
	read      int64              // the bytes given to the caller
	size      int64              // the whole body's length; -1 if unknown
	validator string             // the If-Range value: the strong ETag, else Last-Modified
	etag      string             // the first response's ETag, if any

	mu       sync.Mutex    // a Close may come from another goroutine while Read runs, to abort it
	body     io.ReadCloser // the body being read; changed by Read alone
	err      error         // the error every later Read returns, once the body has ended
	ended    bool          // the request has ended (see end)
	closed   bool          // Close was called
	resuming bool          // Read is resuming the body: it ends the request when done
}

// resumeLater returns resp, the first answer to a request that resumes its
// body, with a body that resumes should it break. The call moves to the
// heap, and stays in flight at its host and budget until the body ends.
func (c *call) resumeLater(a *attempt, resp *http.Response) (*http.Response, error) {
	var validator, etag string
	if c.p.resume && c.resume == nil && resumableResponse(c.req, resp) {
		validator, etag = resumeValidator(resp.Header)
	}
	if validator == "" {
		return c.finish(a, resp, nil)
	}
	rc := new(call)
	*rc = *c
	c.held = held{} // rc holds it now
	r := &resumable{c: rc, n: a.n, body: resp.Body, size: resp.ContentLength, validator: validator, etag: etag}
	rc.parent, r.cancel = context.WithCancel(c.parent) // a Close cancels a resume under way
	rc.resume = r
	resp.Body = r
	return rc.finish(a, resp, nil)
}

// resumableResponse reports whether resp, the answer to req, can be
// resumed: a whole body (200) to a GET or QUERY that asked for no range, in
// bytes the server can serve from any offset (Accept-Ranges: bytes), as
// sent (no content coding, net/http's transparent gzip included).
func resumableResponse(req *http.Request, resp *http.Response) bool {
	return (req.Method == http.MethodGet || req.Method == "QUERY") &&
		resp.StatusCode == http.StatusOK && resp.ContentLength != 0 && resp.Body != http.NoBody &&
		req.Header.Get("Range") == "" && !resp.Uncompressed && identityCoding(resp.Header) &&
		strings.EqualFold(strings.TrimSpace(resp.Header.Get("Accept-Ranges")), "bytes")
}

// identityCoding reports whether h declares no content coding but identity.
func identityCoding(h http.Header) bool {
	ce := h.Get("Content-Encoding")
	return ce == "" || strings.EqualFold(ce, "identity")
}

// resumeValidator returns the If-Range value for a response with header h,
// and its ETag: a strong ETag; else, without an ETag, a Last-Modified that
// is a strong validator (a Date at least a second after it, RFC 9110
// section 8.8.2.2); else "", as a weak ETag cannot be used.
func resumeValidator(h http.Header) (validator, etag string) {
	etag = h.Get("ETag")
	switch {
	case strings.HasPrefix(etag, `"`) && len(etag) >= 2 && strings.HasSuffix(etag, `"`):
		return etag, etag
	case etag != "":
		return "", etag // weak, or not an entity tag
	}
	lm, err1 := http.ParseTime(h.Get("Last-Modified"))
	date, err2 := http.ParseTime(h.Get("Date"))
	if err1 != nil || err2 != nil || date.Sub(lm) < time.Second {
		return "", ""
	}
	return h.Get("Last-Modified"), ""
}

// Read reads the body; should it break, it asks for the rest and goes on
// reading that. An error it cannot resume from ends the body.
func (r *resumable) Read(p []byte) (int, error) {
	for {
		r.mu.Lock()
		body, ended := r.body, r.err
		r.mu.Unlock()
		if ended != nil {
			return 0, ended
		}
		n, err := body.Read(p)
		r.read += int64(n)
		switch {
		case err == nil:
			return n, nil
		case err == io.EOF && (r.size < 0 || r.read == r.size):
			r.end(io.EOF)
			return n, io.EOF
		case err == io.EOF:
			err = io.ErrUnexpectedEOF // shorter than its length
		}
		if r.resume(err); n > 0 {
			return n, nil // the next Read goes on, or reports the end
		}
	}
}

// resume continues the body after it broke with err: the call's loop
// judges the break as an attempt's failure, and retries if it may, asking
// for the rest. A 206 continues the body; anything else ends it.
func (r *resumable) resume(err error) {
	r.mu.Lock()
	r.body.Close()
	r.body = http.NoBody // closed: a Close of the response must not close it again
	r.resuming = !r.closed
	r.mu.Unlock()
	c := r.c
	if !r.resuming || c.parent.Err() != nil {
		r.end(err) // closed, or the caller's context cut the body: nothing to resume
		return
	}
	a := attempt{n: r.n, err: fmt.Errorf("retryhttp: response body cut after %d bytes: %w", r.read, err)}
	finished := false
	defer func() {
		if !finished { // a hook panicked: the request ends here
			r.mu.Lock()
			r.err, r.ended = cmp.Or(r.err, err), true
			r.mu.Unlock()
			r.cancel()
			c.closeHeld()
		}
	}()
	resp, err := c.loop(&a)
	finished = true
	r.mu.Lock()
	r.resuming = false
	if err == nil {
		r.body, r.n = resp.Body, c.sent
		if r.closed {
			err = errClosedBody
		}
	}
	r.mu.Unlock()
	if err != nil {
		r.end(err)
	}
}

// errClosedBody is what a Read of a closed body returns.
var errClosedBody = errors.New("retryhttp: read on closed response body")

// ask sets the header of an attempt that resumes the body: the rest, from
// the first byte not read, if the body has not changed.
func (r *resumable) ask(h http.Header) {
	h.Set("Range", "bytes="+strconv.FormatInt(r.read, 10)+"-")
	h.Set("If-Range", r.validator)
	h.Set("Accept-Encoding", "identity") // the bytes as first sent, not gzipped anew
}

// check returns why resp, the answer to an attempt that resumes the body,
// cannot continue it, or nil: it must be a 206 of the same body from the
// first byte not read, as sent. A nil r resumes nothing: any answer goes.
func (r *resumable) check(resp *http.Response) error {
	if r == nil {
		return nil // a call that resumes no body
	}
	why := ""
	first, last, size, ok := contentRange(resp.Header.Get("Content-Range"))
	switch etag := resp.Header.Get("ETag"); {
	case resp.StatusCode != http.StatusPartialContent:
		why = fmt.Sprintf("the server answered %d %s (it ignores Range, or the body changed)",
			resp.StatusCode, http.StatusText(resp.StatusCode))
	case !ok || first != r.read || (size >= 0 && last != size-1) || (r.size >= 0 && size != r.size):
		why = fmt.Sprintf("the rest came as Content-Range %q", resp.Header.Get("Content-Range"))
	case r.etag != "" && etag != "" && etag != r.etag:
		why = "the rest is of another version (ETag " + etag + ", not " + r.etag + ")"
	case !identityCoding(resp.Header) || resp.Uncompressed:
		why = "the rest came with a content coding"
	case r.size < 0:
		r.size = size
	}
	if why != "" {
		return fmt.Errorf("retryhttp: response body cut after %d bytes, and %s", r.read, why)
	}
	return nil
}

// refuse closes resp, a failure answering a resume that the call gave up
// on, and returns the error the body ends with instead of its bytes.
func (r *resumable) refuse(resp *http.Response) error {
	resp.Body.Close()
	return fmt.Errorf("retryhttp: response body cut after %d bytes, and the resume was answered %d %s",
		r.read, resp.StatusCode, http.StatusText(resp.StatusCode))
}

// contentRange parses a Content-Range of one byte range, "bytes
// first-last/size" (size -1 for "*"), written as servers write it: no
// sign, space or leading zero, which the check against its own writing
// refuses.
func contentRange(v string) (first, last, size int64, ok bool) {
	var total string
	fmt.Sscanf(v, "bytes %d-%d/%s", &first, &last, &total)
	size, err := strconv.ParseInt(total, 10, 64)
	written := fmt.Sprintf("bytes %d-%d/%d", first, last, size)
	if total == "*" {
		size, err, written = -1, nil, fmt.Sprintf("bytes %d-%d/*", first, last)
	}
	ok = err == nil && written == v && 0 <= first && first <= last && (total == "*" || last < size)
	return first, last, size, ok
}

// Close closes the body and ends the request, or has the resume under way
// end it: its wait and attempt are canceled.
func (r *resumable) Close() error {
	r.mu.Lock()
	r.closed = true
	body, resuming := r.body, r.resuming
	r.mu.Unlock()
	r.cancel()
	err := body.Close()
	if !resuming {
		r.end(errClosedBody)
	}
	return err
}

// end ends the body with err, and the request, once: it leaves its host
// and budget, as RoundTrip's return does for a body that cannot resume.
func (r *resumable) end(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	first := !r.ended
	r.ended = true
	r.mu.Unlock()
	if first {
		r.cancel()
		r.c.leave()
		r.c.body.Finish()
	}
}
