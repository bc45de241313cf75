package h3retry

import (
	"context"
	"errors"
	"strings"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// classified is an error of QUIC or HTTP/3 with what became of the request
// it ended, which the retryhttp core reads through RetryClass. It reads as
// the error it wraps.
type classified struct {
	err         error
	transient   bool
	nothingSent bool
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// RetryClass reports whether another attempt may succeed (transient), and
// whether the server cannot have processed the request (nothingSent).
func (e *classified) RetryClass() (transient, nothingSent bool) {
	return e.transient, e.nothingSent
}

// classify wraps err, an error of quic-go's http3.Transport, with its
// verdict. wrote reports whether the request's HEADERS frame was written on
// the connection of quic-go's last try: a transient failure before it is
// one of a request the server never saw. A context's error, and an error
// that is neither QUIC's nor HTTP/3's, are returned as they are, for the
// core to decide.
func classify(err error, wrote bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	transient, nothingSent, known := verdict(err)
	if !known {
		return err
	}
	if transient && !wrote {
		nothingSent = true
	}
	return &classified{err: err, transient: transient, nothingSent: transient && nothingSent}
}

// verdict sorts the errors of quic-go and its http3 package; known is
// false for any other error.
func verdict(err error) (transient, nothingSent, known bool) {
	var (
		h3Err     *http3.Error
		streamErr *quic.StreamError
		appErr    *quic.ApplicationError
		transErr  *quic.TransportError
		versions  *quic.VersionNegotiationError
	)
	switch {
	case errors.As(err, &versions):
		// No QUIC version in common: every new connection meets it again.
		// (A certificate not trusted or not for the host the core never
		// retries, whatever a base says.)
		return false, false, true
	case errors.As(err, &transErr) && transErr.ErrorCode.IsCryptoError():
		// A TLS alert (bad certificate, no application protocol), sent or
		// received.
		return false, false, true
	case errors.Is(err, quic.Err0RTTRejected):
		// The server discarded the early data that carried the request.
		return true, true, true
	case errors.As(err, &h3Err):
		// A stream reset (a *quic.StreamError inside) or a connection
		// closed (a *quic.ApplicationError inside) with an HTTP/3 code.
		return h3Verdict(h3Err.ErrorCode, h3Err.Remote, errors.As(err, &streamErr))
	case errors.As(err, &streamErr):
		return h3Verdict(http3.ErrCode(streamErr.ErrorCode), streamErr.Remote, true)
	case errors.As(err, &appErr):
		return h3Verdict(http3.ErrCode(appErr.ErrorCode), appErr.Remote, false)
	case errors.As(err, &transErr):
		// CONNECTION_REFUSED: the server would not take a new connection
		// (RFC 9000 section 20.1). Any other code is a connection lost to
		// a fault of either side, which a new connection may not meet.
		return true, transErr.Remote && transErr.ErrorCode == quic.ConnectionRefused, true
	case isQUICConnErr(err), isConnUnusable(err):
		return true, false, true
	}
	return false, false, false
}

// h3Verdict sorts an HTTP/3 error code (RFC 9114 section 8.1) that reset
// the request's stream (stream) or closed its connection.
func h3Verdict(code http3.ErrCode, remote, stream bool) (transient, nothingSent, known bool) {
	switch code {
	case http3.ErrCodeRequestRejected:
		// "A client can treat requests rejected by the server as though
		// they had never been sent at all" (RFC 9114 section 4.1.1).
		return true, stream && remote, true
	case http3.ErrCodeMessageError, http3.ErrCodeVersionFallback, http3.ErrCodeConnectError:
		// A malformed request, one HTTP/3 cannot serve, a CONNECT that
		// failed: the same request meets the same answer.
		return false, false, true
	}
	// H3_REQUEST_CANCELLED, H3_NO_ERROR on a shutdown, H3_INTERNAL_ERROR,
	// H3_EXCESSIVE_LOAD and the protocol errors: the request may have been
	// processed, and another attempt, on another stream or connection, may
	// fare better.
	return true, false, true
}

// isQUICConnErr reports whether err is a QUIC connection that ended under
// the request: timed out while idle or in its handshake, or reset
// statelessly (the server lost its state: a restart).
func isQUICConnErr(err error) bool {
	var (
		idle      *quic.IdleTimeoutError
		handshake *quic.HandshakeTimeoutError
		reset     *quic.StatelessResetError
	)
	return errors.As(err, &idle) || errors.As(err, &handshake) || errors.As(err, &reset)
}

// connUnusable is the text that starts quic-go's error (of an unexported
// type) for a request whose stream could not be opened: nothing of it was
// written. quic-go retries such a request once itself, so it comes back
// only when its second try fails the same way.
const connUnusable = "http3: conn unusable: "

func isConnUnusable(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), connUnusable) {
			return true
		}
	}
	return false
}
