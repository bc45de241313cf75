package bench

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
)

// The measured paths and the scenarios get realistic answers, a real
// API's: about six header fields (Content-Type, Date, Server, X-Request-Id,
// Content-Length unless the body is chunked, and one or two more) and a
// body of 20 to 200 bytes, JSON, plain text or HTML; the failing ones (503)
// carry a body too, a JSON problem or a proxy's HTML page, which a library
// that retries has to drain. The answers are those of realisticOK and
// realisticFailed, in turn.

// An answer is one realistic response: its header fields and its body,
// sent with a Content-Length or chunked.
type answer struct {
	header  http.Header
	body    []byte
	chunked bool
}

// cannedDate is the Date of every realistic answer in memory (a server
// writes the real one). A fixed date keeps the canned base from formatting
// one per answer; its size and shape are a real Date's.
const cannedDate = "Tue, 03 Jun 2025 09:41:27 GMT"

// newAnswer returns an answer with its body and its fields: Content-Type,
// Content-Length (unless chunked), Date, Server and X-Request-Id, then the
// extra ones, given as name, value, name, value...
func newAnswer(contentType, server, requestID, body string, chunked bool, extra ...string) answer {
	h := http.Header{
		"Content-Type": {contentType},
		"Date":         {cannedDate},
		"Server":       {server},
		"X-Request-Id": {requestID},
	}
	if !chunked {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[http.CanonicalHeaderKey(extra[i])] = []string{extra[i+1]}
	}
	return answer{header: h, body: []byte(body), chunked: chunked}
}

// The realistic answers: those to a request answered 200, then those to one
// that failed (the paths' scripts fail with 503 only), each list used in
// turn. Six header fields each, with a Content-Length or chunked; bodies of
// 20 to 200 bytes.
var (
	realisticOK = []answer{
		newAnswer("application/json; charset=utf-8", "nginx/1.25.3", "7f3c9a2e-5b1d-4e8f-a6c4-2d9e0b7f1a53",
			`{"id":"ord_8f3a2c71","status":"shipped","items":3,"total":{"amount":"42.50","currency":"EUR"},"updated_at":"2025-06-03T09:41:27Z"}`,
			false, "Cache-Control", "no-store"),
		newAnswer("text/plain; charset=utf-8", "envoy", "0b6e2d94-1c7a-4f35-8e20-93d1a5c4b7e8",
			"ok: replica 3 of 5, queue depth 0\n",
			true, "X-Envoy-Upstream-Service-Time", "4", "Vary", "Accept-Encoding"),
		newAnswer("text/html; charset=utf-8", "Apache/2.4.58 (Debian)", "c41d7e0a-6f2b-4a98-b3e5-5d8c2f1e9a07",
			"<!DOCTYPE html>\n<html><head><title>Order ord_8f3a2c71</title></head>\n<body><h1>Shipped</h1><p>3 items, 42.50 EUR, on its way.</p></body></html>\n",
			false, "ETag", `"5e1f-61a2c3b4"`),
		newAnswer("application/json", "gunicorn", "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d",
			`{"items":[],"next_cursor":null,"count":0}`,
			true, "Vary", "Accept-Encoding", "Cache-Control", "private, max-age=0"),
	}
	realisticFailed = []answer{
		newAnswer("application/problem+json", "envoy", "e2f1a0b9-8c7d-4e6f-a5b4-c3d2e1f0a9b8",
			`{"type":"about:blank","title":"Service Unavailable","detail":"upstream connect error or disconnect/reset before headers","instance":"/resource"}`,
			false, "Cache-Control", "no-store"),
		newAnswer("text/html", "nginx/1.25.3", "3c2b1a09-f8e7-4d6c-b5a4-938271605f4e",
			"<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
			false, "Cache-Control", "no-cache"),
	}
)

// chunked is the TransferEncoding of a response read from a chunked body,
// as net/http gives it.
var chunked = []string{"chunked"}

// fill makes resp an answer a with status, to req, with body as its body:
// the fields a net/http client would see, its Content-Length (-1 when
// chunked) and its header, a itself, not a copy.
func (a *answer) fill(resp *http.Response, status int, req *http.Request, body io.ReadCloser) {
	*resp = http.Response{
		Status:        statusLine(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        a.header,
		Body:          body,
		ContentLength: int64(len(a.body)),
		Request:       req,
	}
	if a.chunked {
		resp.ContentLength = -1
		resp.TransferEncoding = chunked
	}
}

// serve writes a as a server's answer: its fields but Date (the server
// writes the real one) and its body, chunked (flushed before the handler
// returns, with no Content-Length) when a is.
func (a *answer) serve(w http.ResponseWriter, status int) {
	h := w.Header()
	for k, v := range a.header {
		if k != "Date" {
			h[k] = v
		}
	}
	w.WriteHeader(status)
	w.Write(a.body)
	if a.chunked {
		w.(http.Flusher).Flush()
	}
}

// cloneAnswers returns copies of answers with headers of their own.
func cloneAnswers(answers []answer) []answer {
	out := make([]answer, len(answers))
	for i, a := range answers {
		out[i] = answer{header: a.header.Clone(), body: a.body, chunked: a.chunked}
	}
	return out
}

// sameFields reports whether h holds exactly the fields of want.
func sameFields(h, want http.Header) bool { return maps.EqualFunc(h, want, slices.Equal[[]string]) }

// statusLines holds "503 Service Unavailable" and the like, so that an
// answer's Status costs no allocation.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			m[code] = strconv.Itoa(code) + " " + text
		}
	}
	return m
}()

func statusLine(code int) string {
	if s, ok := statusLines[code]; ok {
		return s
	}
	return strconv.Itoa(code)
}

// BodyCounts counts the bodies of a kind of answer (200, or failed) that a
// Canned base gave: given, read to their end, and closed.
type BodyCounts struct {
	Answered, Drained, Closed int
}

// A body reads canned bytes as a response body does: to io.EOF, then an
// error once closed. It counts its end and its closing once each in
// counts, when set. Like net/http's bodies it has no WriteTo, so io.Copy
// reads it through a buffer.
type body struct {
	b           []byte
	off         int
	ended, shut bool
	counts      *BodyCounts
}

// errReadClosed is what a body read after Close returns, as net/http's do.
var errReadClosed = errors.New("http: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	if b.shut {
		return 0, errReadClosed
	}
	if b.off >= len(b.b) {
		if !b.ended {
			b.ended = true
			if b.counts != nil {
				b.counts.Drained++
			}
		}
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

func (b *body) Close() error {
	if !b.shut {
		b.shut = true
		if b.counts != nil {
			b.counts.Closed++
		}
	}
	return nil
}

// drainBody reads body to its end through buf, as a caller does with an
// answer, and closes it; it returns the bytes read.
func drainBody(body io.ReadCloser, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := body.Read(buf)
		n += int64(k)
		if err != nil {
			body.Close()
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
	}
}

// isRealisticBody reports whether n is the size of the body of one of the
// realistic answers to a request answered 200.
func isRealisticBody(n int64) bool {
	for _, a := range realisticOK {
		if int64(len(a.body)) == n {
			return true
		}
	}
	return false
}
