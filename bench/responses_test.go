package bench

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkRealistic checks that resp is a realistic answer: six header fields,
// Content-Type, a Date net/http parses, Server and X-Request-Id among them,
// and a body of 20 to 200 bytes sent with a Content-Length that matches it
// or chunked (Content-Length -1, Transfer-Encoding chunked, no
// Content-Length field). The body is read to its end and closed; it is
// returned with the answer's media type.
func checkRealistic(t *testing.T, resp *http.Response, fields int) (mediaType string, b []byte) {
	t.Helper()
	h := resp.Header
	if len(h) != fields {
		t.Errorf("%d header fields, want %d: %v", len(h), fields, h)
	}
	for _, name := range []string{"Content-Type", "Date", "Server", "X-Request-Id"} {
		if h.Get(name) == "" {
			t.Errorf("no %s field: %v", name, h)
		}
	}
	if _, err := http.ParseTime(h.Get("Date")); err != nil {
		t.Errorf("Date %q: %v", h.Get("Date"), err)
	}
	mediaType, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		t.Errorf("Content-Type %q: %v", h.Get("Content-Type"), err)
	}
	b, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	if len(b) < 20 || len(b) > 200 {
		t.Errorf("a body of %d bytes, want 20 to 200: %q", len(b), b)
	}
	if slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		if resp.ContentLength != -1 || h.Get("Content-Length") != "" {
			t.Errorf("chunked, with Content-Length %d and field %q", resp.ContentLength, h.Get("Content-Length"))
		}
	} else {
		if resp.ContentLength != int64(len(b)) || h.Get("Content-Length") != strconv.Itoa(len(b)) {
			t.Errorf("a body of %d bytes, Content-Length %d and field %q", len(b), resp.ContentLength, h.Get("Content-Length"))
		}
	}
	return mediaType, b
}

// The canned base's realistic answers are a real API's: six header fields
// each, JSON, plain text and HTML, with a Content-Length or chunked, and
// bodies of 20 to 200 bytes that read to io.EOF, then fail once closed; the
// failed answers (503) carry bodies too, a JSON problem among them. The
// base counts the bodies read to their end and closed.
// So the answers cannot silently become empty.
func TestCannedAnswersRealistically(t *testing.T) {
	c := &Canned{Script: []int{http.StatusServiceUnavailable, http.StatusOK}}
	media := map[int]map[string]bool{http.StatusOK: {}, http.StatusServiceUnavailable: {}}
	chunkedToo := false
	for range 4 * len(realisticOK) { // every answer twice at least, half of them 200
		resp, err := c.RoundTrip(mustRequest(t, target))
		if err != nil {
			t.Fatal(err)
		}
		if want := statusLine(resp.StatusCode); resp.Status != want || !strings.HasPrefix(want, strconv.Itoa(resp.StatusCode)+" ") {
			t.Errorf("status %q, want %q", resp.Status, want)
		}
		body := resp.Body
		mt, b := checkRealistic(t, resp, 6)
		media[resp.StatusCode][mt] = true
		chunkedToo = chunkedToo || resp.ContentLength == -1
		if mt == "application/problem+json" || mt == "application/json" {
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Errorf("%s body %q: %v", mt, b, err)
			}
		}
		if _, err := body.Read(make([]byte, 1)); err == nil || err == io.EOF {
			t.Errorf("a read after Close: %v, want an error", err)
		}
	}
	for _, mt := range []string{"application/json", "text/plain", "text/html"} {
		if !media[http.StatusOK][mt] {
			t.Errorf("no answer 200 of type %s: %v", mt, media[http.StatusOK])
		}
	}
	if !media[http.StatusServiceUnavailable]["application/problem+json"] || len(media[http.StatusServiceUnavailable]) < 2 {
		t.Errorf("the 503s' types %v, want a JSON problem and another", media[http.StatusServiceUnavailable])
	}
	if !chunkedToo {
		t.Error("no answer chunked")
	}
	want := BodyCounts{Answered: 8, Drained: 8, Closed: 8}
	if c.OK != want || c.Failed != want {
		t.Errorf("bodies counted: %+v answered 200, %+v failed; want %+v each", c.OK, c.Failed, want)
	}
	if err := c.intact(); err != nil {
		t.Error(err)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A path's check fails a run whose answers 200 were not read to their end,
// or not closed, or whose answers' headers a library wrote to.
func TestCannedCheckSeesBodiesLeftAndHeadersWritten(t *testing.T) {
	cases := map[string]func(*http.Response){
		"closed unread": func(r *http.Response) { r.Body.Close() },
		"read, not closed": func(r *http.Response) {
			io.Copy(io.Discard, r.Body)
		},
		"header written": func(r *http.Response) {
			r.Header.Set("X-Seen", "1")
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		},
	}
	for name, use := range cases {
		c := &Canned{}
		for range 3 {
			resp, err := c.RoundTrip(mustRequest(t, target))
			if err != nil {
				t.Fatal(err)
			}
			use(resp)
		}
		if err := c.expect(1)(3); err == nil {
			t.Errorf("%s: the check passed", name)
		}
	}
}

// The loopback server's answers are the canned ones, with the server's own
// Date, chunked where they are (over HTTP/1.1: HTTP/2 has no chunks).
func TestLoopbackAnswersRealistically(t *testing.T) {
	lo := newLoopback("h1")
	defer lo.close()
	c := &http.Client{Transport: lo.pool}
	bodies := map[string]bool{}
	for range len(realisticOK) {
		resp, err := c.Get(lo.srv.URL + "/realistic")
		if err != nil {
			t.Fatal(err)
		}
		_, b := checkRealistic(t, resp, 6)
		bodies[string(b)] = true
	}
	if len(bodies) != len(realisticOK) {
		t.Errorf("%d distinct bodies, want %d", len(bodies), len(realisticOK))
	}
}

// What each library does with the bodies of the failed attempts it retries
// (the 503s of the retry path): bare (by hand), retryhttp, go-retryablehttp
// and rehttp read each to its end and close it, paying for the drain;
// failsafe-go (v0.9.8) neither reads nor closes them. BENCHMARKS.md's retry
// section says so; if a library changes, this test fails, and that text
// must change with it.
func TestRetryPathFailedBodies(t *testing.T) {
	const ops = 10
	want := map[string]BodyCounts{
		"bare":                 {Answered: 2 * ops, Drained: 2 * ops, Closed: 2 * ops},
		"retryhttp":            {Answered: 2 * ops, Drained: 2 * ops, Closed: 2 * ops},
		"retryablehttp":        {Answered: 2 * ops, Drained: 2 * ops, Closed: 2 * ops},
		"retryablehttp-client": {Answered: 2 * ops, Drained: 2 * ops, Closed: 2 * ops},
		"failsafe-go":          {Answered: 2 * ops},
		"rehttp":               {Answered: 2 * ops, Drained: 2 * ops, Closed: 2 * ops},
	}
	for _, lib := range Equal(Zero, false) {
		if lib.Name == "bare" {
			lib.Wrap = func(base http.RoundTripper) http.RoundTripper { return newByHand(base) }
		}
		base := &Canned{Script: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}}
		send := reader(lib.Sender(base, http.MethodGet, target, nil))
		for range ops {
			if err := send(); err != nil {
				t.Fatalf("%s: %v", lib.Name, err)
			}
		}
		if err := base.expect(3)(ops); err != nil {
			t.Errorf("%s: %v", lib.Name, err)
		}
		w, ok := want[lib.Name]
		if !ok {
			t.Errorf("%s: no expectation", lib.Name)
		}
		if base.Failed != w {
			t.Errorf("%s: failed answers' bodies %+v, want %+v", lib.Name, base.Failed, w)
		}
		t.Logf("%s: %+v", lib.Name, base.Failed)
	}
}
