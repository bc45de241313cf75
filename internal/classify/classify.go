// Package classify sorts the error of an attempt: whether another attempt
// may help, and whether the server cannot have acted on the request.
package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
)

// A Class is how an attempt's error relates to retrying.
type Class struct {
	Transient bool // another attempt may succeed

	// NothingSent: the server cannot have acted on the request. Either no
	// byte of it reached the server, or the server said it left the request
	// unprocessed (an HTTP/2 REFUSED_STREAM, or a GOAWAY whose last stream
	// is below the request's). A connection closed under a request in
	// flight proves neither.
	NothingSent bool
}

// retryClassifier is an error that says what became of the request it
// ended, for a base transport whose failures the rules of Of do
// not know (QUIC's, HTTP/3's): whether another attempt may help
// (transient), and whether the server cannot have processed the request
// (NothingSent: no byte of it arrived, or the server said so, as HTTP/3's
// H3_REQUEST_REJECTED does), which makes any request safe to send again.
// An error in a chain that has the method, as errors.As finds it, decides
// before any other rule but one: a certificate failure is never retried.
// The interface is unexported on purpose: a base implements the method, and
// no name of the API serves only it.
type retryClassifier interface {
	error
	RetryClass() (transient, nothingSent bool)
}

// h2StreamError mirrors the fields of the HTTP/2 stream error of net/http
// (and golang.org/x/net/http2), whose As method fills any struct of that shape.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

// The HTTP/2 error codes (RFC 9113 section 7) that Of tells apart.
const (
	h2RefusedStream      = 0x7
	h2Cancel             = 0x8
	h2InadequateSecurity = 0xc
	h2HTTP11Required     = 0xd
)

// IsCertErr reports whether err is a TLS failure that another attempt
// would meet again: a certificate not trusted, not for the host, or
// invalid, or a peer that does not speak TLS.
func IsCertErr(err error) bool {
	var (
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
	)
	return errors.As(err, &certErr) || errors.As(err, &unknown) || errors.As(err, &hostErr) ||
		errors.As(err, &invalid) || errors.As(err, &record)
}

// Of sorts an attempt's error. The caller's own cancellation is
// decided before this is called; an attempt timeout is classified by the
// Transport, which knows it set one.
func Of(err error) Class {
	var (
		dnsErr   *net.DNSError
		opErr    *net.OpError
		stream   h2StreamError
		netError net.Error
		own      retryClassifier
	)
	switch {
	case IsCertErr(err):
		// Whatever the base: every new connection would meet it again.
		return Class{}
	case errors.As(err, &own):
		// A base that knows its protocol's failures says what became of
		// the request (the h3retry module does for QUIC and HTTP/3).
		transient, nothingSent := own.RetryClass()
		return Class{Transient: transient || nothingSent, NothingSent: nothingSent}
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return Class{}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return Class{Transient: true, NothingSent: true}
	case errors.As(err, &opErr) && opErr.Op == "proxyconnect":
		// net/http wraps every failure of the connection to a proxy so
		// (the dial, the CONNECT, the TLS to the proxy): before a byte of
		// the request went.
		return Class{Transient: Of(opErr.Err).Transient, NothingSent: true}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Class{Transient: true, NothingSent: true}
	case errors.As(err, &stream):
		// The stream was reset, by the server (RST_STREAM) or by net/http
		// over a response that broke the protocol. RFC 9113 section 8.7:
		// a refused stream was not processed.
		return Class{Transient: h2Transient(stream.Code), NothingSent: stream.Code == h2RefusedStream}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The connection broke under the request. net.ErrClosed ("use of
		// closed network connection") is the write that follows: net/http
		// closes a connection once it reads a reset or an end from it, and
		// the request body still being written meets it closed.
		return Class{Transient: true}
	}
	if f, ok := netHTTPFailure(err); ok {
		return f
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A context the caller did not own (e.g. one a base transport made).
		return Class{Transient: true}
	case errors.As(err, &netError) && netError.Timeout():
		return Class{Transient: true}
	}
	return Class{}
}

// h2Transient reports whether a request that an HTTP/2 error code ended,
// on its stream (RST_STREAM) or its connection (GOAWAY), is worth another
// attempt. A reset is HTTP/2's form of a broken connection, and a GOAWAY
// sends the next attempt to a new connection, so most codes are, CANCEL
// among them: a stream the server gave up on, which OkHttp and Envoy send
// again on a new stream too (the method rules still decide whether the
// request may be sent again). Not: INADEQUATE_SECURITY and
// HTTP_1_1_REQUIRED, refusals of the connection that any new connection
// would meet again (net/http does not fall back to HTTP/1.1 by itself).
//
// net/http also resets a stream itself, with PROTOCOL_ERROR or
// FLOW_CONTROL_ERROR, when the server's response breaks the protocol.
// Those count as the server's resets: telling them apart would take the
// text of an unexported cause, for the price of a few more attempts of
// requests that are safe to repeat.
func h2Transient(code uint32) bool {
	switch code {
	case h2InadequateSecurity, h2HTTP11Required:
		return false
	}
	return true
}

// The texts of errors that net/http's HTTP/2 client makes with errors.New
// or fmt.Errorf and does not export, so that errors.Is and errors.As cannot
// reach them from outside the package. golang.org/x/net/http2 words them
// the same. Each is matched whole, as the text of an error that wraps no
// other (never as part of a longer message), and each is pinned by
// TestClassifyRealErrors against the error a real net/http client returns
// from a real server, so that a Go release that rewords one fails there.
const (
	// A write on the connection failed, and net/http closed it under every
	// stream (clientStream.cleanupWriteRequest calls ClientConn.Close).
	h2ForceClosed = "http2: client connection force closed via ClientConn.Close"
	// The server answered no PING within the PingTimeout.
	h2ConnLost = "http2: client connection lost"
	// The connection closed before its first stream opened.
	h2NotEstablished = "http2: client conn could not be established"
	// A graceful GOAWAY (NO_ERROR) came with a last stream below this one.
	h2GracefulGoAway = "http2: Transport received Server's graceful shutdown GOAWAY"
	// A GOAWAY with an error code came with a last stream below the first
	// stream of the connection; the code's RFC 9113 name follows.
	h2GoAwayFirstStream = "http2: Transport received GOAWAY from server ErrCode:"
	// net/http would resend the request itself after an error it knows
	// left the request unprocessed or safe to resend (REFUSED_STREAM, a
	// GOAWAY above the stream, a PROTOCOL_ERROR reset), but cannot rewind
	// the body; the error it quotes is only text by then.
	h2CannotRetry = "http2: Transport: cannot retry err ["
)

// h1ServerClosedIdle is the text of net/http's HTTP/1 error for a request
// that took a keep-alive connection as the server closed it. net/http
// resends such a request itself when its method is idempotent by its own
// definition (not PUT or DELETE) or it carries an idempotency key; others
// get the error. Bytes of the request may have been written: like a reset,
// it does not prove that nothing was sent. Unexported, it is matched and
// pinned as the HTTP/2 texts are.
const h1ServerClosedIdle = "http: server closed idle connection"

// h1TLSHandshakeTimeout is the text of net/http's error for a connection
// whose TLS handshake outlasted Transport.TLSHandshakeTimeout: no byte of
// the request was sent. Matched and pinned as the texts above.
const h1TLSHandshakeTimeout = "net/http: TLS handshake timeout"

// netHTTPFailure classifies the errors of net/http that only their text
// or their fields identify: the HTTP/2 GOAWAY error, whose type is
// unexported, and the unexported texts above.
func netHTTPFailure(err error) (f Class, ok bool) {
	eachError(err, func(e error) bool {
		if code, isGoAway := goAwayCode(e); isGoAway {
			// The server closed the connection after a GOAWAY whose last
			// stream is at or above the request's: it may have processed it.
			f, ok = Class{Transient: h2Transient(code)}, true
			return true
		}
		switch e.(type) {
		case interface{ Unwrap() error }, interface{ Unwrap() []error }:
			return false
		}
		f, ok = textFailure(e.Error())
		return ok
	})
	return f, ok
}

// textFailure classifies an error by its whole text, as net/http words it.
func textFailure(text string) (Class, bool) {
	switch text {
	case h2ForceClosed, h2ConnLost, h1ServerClosedIdle:
		return Class{Transient: true}, true
	case h2NotEstablished, h2GracefulGoAway, h1TLSHandshakeTimeout:
		return Class{Transient: true, NothingSent: true}, true
	}
	if name, ok := strings.CutPrefix(text, h2GoAwayFirstStream); ok {
		transient := true
		switch name {
		case "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED": // see h2Transient
			transient = false
		}
		return Class{Transient: transient, NothingSent: true}, true
	}
	if strings.HasPrefix(text, h2CannotRetry) {
		return Class{Transient: true}, true
	}
	return Class{}, false
}

// goAwayCode reports whether err is the error of net/http's HTTP/2 client
// (or golang.org/x/net/http2's) for a connection the server closed after
// sending GOAWAY, and the GOAWAY's error code. net/http's type is
// unexported and has no As method, so neither errors.As nor errors.Is can
// reach it from outside the package. It is recognized by its fields, the
// same in both packages (LastStreamID uint32, ErrCode a uint32 code), not by
// its type's name; TestClassifyRealErrors pins them against a real GOAWAY.
func goAwayCode(err error) (code uint32, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	last, errCode := v.FieldByName("LastStreamID"), v.FieldByName("ErrCode")
	if !last.IsValid() || last.Kind() != reflect.Uint32 || !errCode.IsValid() || errCode.Kind() != reflect.Uint32 {
		return 0, false
	}
	return uint32(errCode.Uint()), true
}

// eachError calls f on err and on every error it wraps, depth first, until
// f returns true.
func eachError(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if eachError(e, f) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
