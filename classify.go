package retryhttp

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

// failure describes how an attempt's error relates to retrying.
type failure struct {
	transient   bool // another attempt may succeed
	nothingSent bool // no byte of the request can have reached the server
}

// h2StreamError mirrors the fields of the HTTP/2 stream error of net/http
// (and golang.org/x/net/http2), whose As method fills any struct of that shape.
type h2StreamError struct {
	StreamID uint32
	Code     uint32
	Cause    error
}

func (e h2StreamError) Error() string { return "http2 stream error" }

const h2RefusedStream = 0x7 // RFC 9113 section 7, REFUSED_STREAM

// classifyErr sorts an attempt's error. The caller's own cancellation is
// decided before this is called; an attempt timeout is classified by the
// Transport, which knows it set one.
func classifyErr(err error) failure {
	var (
		certErr  *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		dnsErr   *net.DNSError
		opErr    *net.OpError
		stream   h2StreamError
		netError net.Error
	)
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &hostErr),
		errors.As(err, &invalid), errors.As(err, &record):
		return failure{}
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return failure{}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return failure{transient: true, nothingSent: true}
	case errors.Is(err, syscall.ECONNREFUSED):
		return failure{transient: true, nothingSent: true}
	case errors.As(err, &stream) && stream.Code == h2RefusedStream:
		// RFC 9113 section 8.7: a refused stream was not processed.
		return failure{transient: true, nothingSent: true}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		isGoAway(err):
		return failure{transient: true}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A context the caller did not own (e.g. one a base transport made).
		return failure{transient: true}
	case errors.As(err, &netError) && netError.Timeout():
		return failure{transient: true}
	}
	return failure{}
}

// isGoAway reports whether err holds the HTTP/2 GOAWAY error of net/http or
// golang.org/x/net/http2. Both are struct types named GoAwayError (net/http's
// unexported) with a LastStreamID field; neither can be reached with
// errors.As from outside its package, so the chain is matched by shape.
func isGoAway(err error) bool {
	for err != nil {
		t := reflect.TypeOf(err)
		if t.Kind() == reflect.Struct && strings.HasSuffix(t.Name(), "GoAwayError") {
			if _, ok := t.FieldByName("LastStreamID"); ok {
				return true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if isGoAway(e) {
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
