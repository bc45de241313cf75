package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// The sentinel errors of ErrorType's names, exported by the root package
// (as retryhttp.ErrThrottled and retryhttp.ErrAttemptTimeout).
var (
	ErrThrottled      = errors.New("retryhttp: throttled in the client (the host rejects most requests)")
	ErrAttemptTimeout = errors.New("retryhttp: attempt timeout")
)

// ErrorType returns a short, low-cardinality name for an attempt's error,
// as OpenTelemetry's error.type attribute wants it: "timeout",
// "connection_refused", "connection_reset", "connection_closed",
// "dns_error", "tls_error", "canceled", "throttled", or "_OTHER".
func ErrorType(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrThrottled):
		return "throttled"
	case errors.Is(err, ErrAttemptTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection_reset"
	case errors.As(err, &dnsErr):
		return "dns_error"
	case IsCertErr(err):
		return "tls_error"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.EPIPE), Of(err).Transient:
		return "connection_closed"
	}
	return "_OTHER"
}
