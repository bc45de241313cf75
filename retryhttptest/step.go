package retryhttptest

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// A Step is what the server does with one request: respond with a status,
// headers and body, possibly late, slowly or cut short, or fail in one of
// the ways networks fail. Steps are values: build one with Status, Reset,
// ApplyThenDrop, Hang, Respond, SlowBody or CloseMidBody, and refine it with
// its methods, each of which returns a modified copy.
//
// The zero Step responds 200 OK with an empty body.
type Step struct {
	kind     stepKind
	status   int
	header   http.Header
	body     []byte
	handler  http.Handler
	after    time.Duration // wait before acting
	slow     time.Duration // spread the body's bytes over this time
	cut      bool          // close the connection mid-body
	cutAt    int           // bytes of the body sent before it closes
	goAway   bool
	upload   uploadFault // what it does to the request's body, after uploadAt bytes
	uploadAt int64
}

// uploadFault is what a step does to a request's body midway.
type uploadFault uint8

const (
	uploadWhole uploadFault = iota // read it all, then act
	uploadReset                    // reset the connection
	uploadStall                    // stop reading, and hang
)

type stepKind uint8

const (
	kindRespond stepKind = iota // write status, header and body
	kindReset                   // reset the connection
	kindDrop                    // call the handler, then reset the connection
	kindHang                    // wait until the client or the server gives up
	kindHandler                 // call the handler with the real ResponseWriter
	kindHangup                  // close the connection in order, without a response
)

// slowChunks bounds the number of pieces a slow body is written in.
const slowChunks = 10

// Status returns a step that responds with the status code and an empty
// body. Add headers and a body with WithHeader and WithBody. It panics if
// code is not a three-digit status code, as a nil handler panics Respond
// and ApplyThenDrop: a script with such a step is a mistake in the test.
func Status(code int) Step {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("retryhttptest: invalid status code %d", code))
	}
	return Step{status: code}
}

// Reset returns a step that resets the connection without responding:
// SO_LINGER is set to zero before the connection is closed, so the client
// reads a TCP RST (ECONNRESET) where it expected the response. Over
// HTTP/2 this fails every stream of the connection.
//
// On a connection it has used before, the Transport of net/http sends a
// replayable request again by itself before any retry layer above it sees
// the error: one with no body or with GetBody, whose method is GET, HEAD,
// OPTIONS or TRACE or which carries an Idempotency-Key or
// X-Idempotency-Key header. The server records both attempts.
func Reset() Step {
	return Step{kind: kindReset}
}

// ApplyThenDrop returns a step that calls h with the request, as a server
// applies it, and then resets the connection instead of sending h's
// response: the request took effect but the client never learns it. This
// is the case that makes retrying a non-idempotent request unsafe, and the
// one idempotency keys exist for. Whatever h writes is discarded. As with
// Reset, the Transport of net/http may resend a replayable request by
// itself when the connection was reused.
func ApplyThenDrop(h http.Handler) Step {
	if h == nil {
		panic("retryhttptest: ApplyThenDrop with a nil handler")
	}
	return Step{kind: kindDrop, handler: h}
}

// Hangup returns a step that closes the connection without responding, in
// order (a TCP FIN, not a reset): the client reads EOF where it expected
// the response headers, as from a server that crashed or dropped an idle
// connection just as the request arrived. Over HTTP/2 the stream is reset
// instead. Like Reset, it may make the Transport of net/http resend a
// replayable request on a reused connection by itself.
func Hangup() Step {
	return Step{kind: kindHangup}
}

// Hang returns a step that never responds: it waits until the client gives
// up (the request's context is done), or until the server is closed, and
// then closes the request without a response.
func Hang() Step {
	return Step{kind: kindHang}
}

// Respond returns a step that lets h answer the request, for anything the
// other steps cannot express. Headers set with WithHeader are in h's
// ResponseWriter before it runs, After delays the call, and GoAway applies
// to h's response, as CloseMidBody does to its body (a file server's cut
// mid-way: http.FileServer, http.ServeContent); WithBody and SlowBody have
// no effect.
func Respond(h http.Handler) Step {
	if h == nil {
		panic("retryhttptest: Respond with a nil handler")
	}
	return Step{kind: kindHandler, handler: h}
}

// SlowBody returns a step that responds 200 OK with a body of n bytes of
// 'x', sent over the duration over: the headers go out at once and the
// body in up to 10 equal pieces, each after an equal pause, the last at
// over. It is shorthand for Status(200).WithBody(n bytes).SlowBody(over).
func SlowBody(n int, over time.Duration) Step {
	return Step{body: filler(n), slow: over}
}

// CloseMidBody returns a step that responds 200 OK with a Content-Length
// of 2n+1 bytes, sends the first n bytes of that body and then closes the
// connection, so the client reading the body gets an error
// (io.ErrUnexpectedEOF over HTTP/1.1). It is shorthand for
// Status(200).WithBody(2n+1 bytes of 'x').CloseMidBody(n).
func CloseMidBody(n int) Step {
	n = max(n, 0)
	return Step{body: filler(2*n + 1)}.CloseMidBody(n)
}

// WithHeader returns a copy of s that sets the response header field key
// to value, replacing earlier values of key.
func (s Step) WithHeader(key, value string) Step {
	s.header = s.header.Clone()
	if s.header == nil {
		s.header = make(http.Header)
	}
	s.header.Set(key, value)
	return s
}

// WithBody returns a copy of s whose response carries body, with a
// Content-Length of its size.
func (s Step) WithBody(body string) Step {
	s.body = []byte(body)
	return s
}

// After returns a copy of s that waits d before it acts: before the
// response headers of a responding step (a slow server), before the reset
// of Reset. If the client gives up first, the request ends without a
// response.
func (s Step) After(d time.Duration) Step {
	s.after = d
	return s
}

// SlowBody returns a copy of s that sends its body over the duration
// over: the headers at once, then the body in up to 10 equal pieces, each
// after a pause of over divided by their number. It applies to steps made
// with Status.
func (s Step) SlowBody(over time.Duration) Step {
	s.slow = over
	return s
}

// CloseMidBody returns a copy of s that sends only the first n bytes of
// its body, although the Content-Length declares all of it, and then
// closes the connection: over HTTP/1.1 the client reads n bytes and then
// io.ErrUnexpectedEOF; over HTTP/2 the stream is reset. A body of n bytes
// or fewer is first extended with 'x' to n+1 bytes, so the cut is always
// mid-body. It applies to steps made with Status, and to Respond's: h's
// body is cut after its first n bytes (not at all if h writes n or fewer).
func (s Step) CloseMidBody(n int) Step {
	s.cut, s.cutAt = true, max(n, 0)
	if len(s.body) <= s.cutAt {
		s.body = append(bytes.Clone(s.body), filler(s.cutAt+1-len(s.body))...)
	}
	return s
}

// ResetMidUpload returns a copy of s that reads only the first n bytes of
// the request's body and then resets the connection, without a response:
// the client sees its upload broken off (a reset, or a broken pipe).
// Server.Requests records the n bytes received (BodyLen, BodySHA256).
func (s Step) ResetMidUpload(n int64) Step {
	s.upload, s.uploadAt = uploadReset, max(n, 0)
	return s
}

// StallMidUpload returns a copy of s that reads only the first n bytes of
// the request's body and then stops reading, until the client gives up or
// the server closes: an upload that stalls midway, for AttemptTimeout or
// a deadline to end. Server.Requests records the n bytes received.
func (s Step) StallMidUpload(n int64) Step {
	s.upload, s.uploadAt = uploadStall, max(n, 0)
	return s
}

// GoAway returns a copy of s after whose response the server ends the
// connection gracefully: over HTTP/2 it sends GOAWAY (NO_ERROR), over
// HTTP/1.1 it responds with "Connection: close". Either way the client
// opens a new connection for its next request.
//
// The server of net/http sends GOAWAY only gracefully, naming as the last
// stream the highest one it has received, so no request in flight is lost;
// a GOAWAY with an error code, or one that refuses streams already sent,
// cannot be scripted. Reset is the abrupt alternative.
func (s Step) GoAway() Step {
	s.goAway = true
	return s
}

// String describes the step, e.g. "Status(503)" or "Reset()".
func (s Step) String() string {
	var b []byte
	switch s.kind {
	case kindRespond:
		b = append(b, "Status("...)
		b = strconv.AppendInt(b, int64(s.code()), 10)
		b = append(b, ')')
	case kindReset:
		b = append(b, "Reset()"...)
	case kindDrop:
		b = append(b, "ApplyThenDrop(handler)"...)
	case kindHang:
		b = append(b, "Hang()"...)
	case kindHangup:
		b = append(b, "Hangup()"...)
	case kindHandler:
		b = append(b, "Respond(handler)"...)
	}
	if len(s.header) > 0 {
		b = append(b, ".WithHeader(...)"...)
	}
	if len(s.body) > 0 {
		b = append(b, ".WithBody("...)
		b = strconv.AppendInt(b, int64(len(s.body)), 10)
		b = append(b, " bytes)"...)
	}
	if s.after > 0 {
		b = append(b, ".After("+s.after.String()+")"...)
	}
	if s.slow > 0 {
		b = append(b, ".SlowBody("+s.slow.String()+")"...)
	}
	if s.cut {
		b = append(b, ".CloseMidBody("...)
		b = strconv.AppendInt(b, int64(s.cutAt), 10)
		b = append(b, ')')
	}
	if s.goAway {
		b = append(b, ".GoAway()"...)
	}
	if s.upload != uploadWhole {
		b = append(b, map[uploadFault]string{uploadReset: ".ResetMidUpload(", uploadStall: ".StallMidUpload("}[s.upload]...)
		b = strconv.AppendInt(b, s.uploadAt, 10)
		b = append(b, ')')
	}
	return string(b)
}

func (s *Step) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// filler returns n bytes of 'x'.
func filler(n int) []byte {
	return bytes.Repeat([]byte{'x'}, max(n, 0))
}
