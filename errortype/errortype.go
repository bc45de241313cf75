// Package errortype names the errors of requests sent through a
// retryhttp.Transport as OpenTelemetry's error.type attribute wants them:
// a short name of few values, the same that the Transport's Logger gives
// them, so that a companion's metrics and spans (otelretry's) or a
// caller's own agree with its logs.
package errortype

import (
	"errors"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/classify"
)

// Of returns the name of err: "throttled" (an *Error of ReasonThrottled, no attempt sent),
// "timeout" (retryhttp.ErrAttemptTimeout, a context's deadline, or an
// error whose Timeout method says so, as net/http's do),
// "canceled", "connection_refused", "connection_reset", "dns_error",
// "tls_error", "connection_closed" (any other transient network failure),
// or "_OTHER"; and "" for a nil err.
func Of(err error) string {
	switch {
	case throttled(err):
		return "throttled"
	case errors.Is(err, retryhttp.ErrAttemptTimeout):
		return "timeout"
	}
	return classify.ErrorType(err)
}

// throttled reports whether err is the *retryhttp.Error of a request that
// adaptive throttling rejected before any attempt.
func throttled(err error) bool {
	var e *retryhttp.Error
	return errors.As(err, &e) && e.Reason == retryhttp.ReasonThrottled && e.Attempts == 0
}
