package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/retryhttp/retryhttp/internal/classify"
	"github.com/retryhttp/retryhttp/internal/replay"
)

// ErrBodyLength is wrapped by the error of a request that was not sent
// because its body held more or fewer bytes than its ContentLength.
var ErrBodyLength = replay.ErrLength

// ErrAttemptTimeout is wrapped by the error of an attempt that ran out of
// Policy.AttemptTimeout before its response headers arrived.
var ErrAttemptTimeout = classify.ErrAttemptTimeout

// Reason says why a Transport stopped retrying a request.
type Reason uint8

// The reasons a Transport gives up.
const (
	ReasonExhausted     Reason = iota + 1 // MaxAttempts attempts were made
	ReasonNotTransient                    // the failure is not worth another attempt
	ReasonNotIdempotent                   // it may have been applied: unsafe to send again
	ReasonBody                            // the request body cannot be sent again in full
	ReasonBudget                          // the retry budget is spent
	ReasonRetryAfter                      // the server asked for a wait over MaxRetryAfter
	ReasonDeadline                        // the wait would end past the deadline, or it passed
	ReasonCanceled                        // the caller canceled the request
	ReasonNested                          // a retrying transport inside already retried
	ReasonServer                          // the server said not to (X-Should-Retry: false)
	ReasonThrottled                       // throttling rejected it in the client: never sent
	ReasonNoRetries                       // one attempt allowed (MaxAttempts 1, WithoutRetries)
	ReasonOuter                           // a layer above (an SDK) retries: this had its share
	ReasonPrepareRetry                    // PrepareRetry failed: the retry was not sent
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonExhausted:     "attempts exhausted",
	ReasonNotTransient:  "not transient",
	ReasonNotIdempotent: "not idempotent",
	ReasonBody:          "body not replayable",
	ReasonBudget:        "retry budget spent",
	ReasonRetryAfter:    "Retry-After too long",
	ReasonDeadline:      "deadline",
	ReasonCanceled:      "canceled",
	ReasonNested:        "retried by an inner transport",
	ReasonServer:        "server said not to retry",
	ReasonThrottled:     "throttled in the client",
	ReasonNoRetries:     "retries off",
	ReasonOuter:         "retried by an outer layer",
	ReasonPrepareRetry:  "PrepareRetry failed",
}

func (r Reason) String() string {
	if r > 0 && r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Error is the error of a request a Transport gave up on. It unwraps to
// the last attempt's error and, when the caller's context ended the request
// (ReasonDeadline, ReasonCanceled), to the context's error:
// errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// context.DeadlineExceeded) see through it. The deadline ends a request
// also when the Transport gives up before it, the next attempt's wait
// ending past it (ReasonDeadline): the error is then the one the request
// would have had at the deadline, context.DeadlineExceeded, and Timeout
// reports true, though the context is not done yet.
type Error struct {
	Attempts int    // attempts made
	Reason   Reason // why no further attempt was made
	Err      error  // the last attempt's error (for a response, one naming its status)

	ctxErr error // the caller's context error, when its end or deadline ended the request
}

func (e *Error) Error() string {
	s := "retryhttp: gave up after 1 attempt"
	if e.Attempts != 1 {
		s = fmt.Sprintf("retryhttp: gave up after %d attempts", e.Attempts)
	}
	s += " (" + e.Reason.String() + ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the last attempt's error and the context's error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.ctxErr != nil && !errors.Is(e.Err, e.ctxErr) {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// Timeout reports whether the request ran out of time: the last attempt's
// error is a timeout (an attempt timeout, net/http's ResponseHeaderTimeout,
// a dial timeout) or the caller's deadline ended the request, passed or
// about to be (ReasonDeadline). So
// err.(net.Error).Timeout() and os.IsTimeout(err), directly or through the
// *url.Error of an http.Client, read as they would for the bare transport's
// error.
func (e *Error) Timeout() bool {
	if errors.Is(e.ctxErr, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// Temporary reports Timeout(). It is deprecated in net.Error, but net.Error
// still requires it, and *Error is a net.Error, as net/http's own errors
// are: err.(net.Error) holds for it as for the bare transport's.
func (e *Error) Temporary() bool { return e.Timeout() }

// statusError stands for an attempt that ended with a retryable response
// status when that response cannot be returned (its body was drained before
// the caller's context ended the wait for the next attempt).
type statusError struct {
	StatusCode int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("response status %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}
