package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// ErrorType returns a short, low-cardinality name for an attempt's error,
// as OpenTelemetry's error.type attribute wants it: "timeout" (an error
// whose Timeout method says so, as the Transport's attempt timeout's
// does), "connection_refused", "connection_reset", "connection_closed",
// "dns_error", "tls_error", "canceled", or "_OTHER". (The root package
// names its own throttling error, "throttled", before asking.)
func ErrorType(err error) string {
	var dnsErr *net.DNSError
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
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
