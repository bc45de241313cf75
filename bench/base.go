package bench

import (
	"io"
	"net/http"
)

// Canned is an in-memory base transport for sequential benchmarks: it reads
// and closes the request body as a real transport would, and answers with
// statuses in turn from Script (200 when Script is empty). It reuses one
// response value, reset on each call, so it allocates nothing itself and a
// benchmark through it measures only what wraps it; libraries that replace
// a response's Body therefore cannot stack wrappers across calls.
//
// A Canned is not safe for simultaneous use.
type Canned struct {
	Script []int // statuses answered in turn, cyclically
	Calls  int   // attempts received

	resp   http.Response
	header http.Header
}

// RoundTrip answers req with the next status of the script.
func (c *Canned) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	status := http.StatusOK
	if len(c.Script) > 0 {
		status = c.Script[c.Calls%len(c.Script)]
	}
	c.Calls++
	if c.header == nil {
		c.header = http.Header{}
	}
	c.resp = http.Response{
		Status:     http.StatusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     c.header,
		Body:       http.NoBody,
		Request:    req,
	}
	return &c.resp, nil
}
