package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/replay"
)

// ErrBodyLength is wrapped by the error of a request that was not sent
// because its body held more or fewer bytes than its ContentLength.
var ErrBodyLength = errors.New("retryhttp: request body length differs from ContentLength")

// bodyLengthError returns err, the error of a body to be sent again, as
// the caller sees it: wrapping ErrBodyLength if the body did not match its
// ContentLength.
func bodyLengthError(err error) error {
	var le *replay.LengthError
	if errors.As(err, &le) {
		return fmt.Errorf("%w (%v)", ErrBodyLength, le)
	}
	return err
}

// ErrAttemptTimeout is wrapped by the error of an attempt that ran out of
// Policy.AttemptTimeout before its response headers arrived.
var ErrAttemptTimeout = errors.New("retryhttp: attempt timeout")

// Reason says why a Transport stopped retrying a request.
type Reason uint8

// The reasons a Transport gives up.
const (
	// ReasonExhausted: the request made all the attempts it may make
	// (MaxAttempts, or what a layer above that retries it left it).
	ReasonExhausted Reason = iota + 1
	// ReasonNoRetries: retries are off for the request (MaxAttempts 1,
	// an SDK above that retries it), whatever its failure
	// (unless throttled, canceled or past its deadline), or a retrying
	// Transport beneath already retried it.
	ReasonNoRetries
	// ReasonUnsafe: sending it again could apply it twice (a method that
	// is not idempotent, without a key), or its body cannot be sent again
	// in full.
	ReasonUnsafe
	// ReasonNotTransient: the failure is not worth another attempt (an
	// error the rules do not retry, or a failure Retryable said so of),
	// PrepareRetry failed, or the request could not be sent at all
	// (ErrBodyLength, ErrIdempotencyKey). A status the policy does not
	// retry (a 400) is no failure: the response is the answer.
	ReasonNotTransient
	ReasonServer     // the server said not to retry (X-Should-Retry: false)
	ReasonBudget     // the retry budget refused the retry
	ReasonThrottled  // adaptive throttling rejected it in the client: never sent
	ReasonRetryAfter // the server asked for a wait over MaxRetryAfter
	ReasonDeadline   // the wait would end past the deadline, or it passed
	ReasonCanceled   // the caller canceled the request
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonExhausted:    "attempts exhausted",
	ReasonNoRetries:    "retries off",
	ReasonUnsafe:       "unsafe to send again",
	ReasonNotTransient: "not transient",
	ReasonServer:       "server said not to retry",
	ReasonBudget:       "retry budget spent",
	ReasonThrottled:    "throttled in the client",
	ReasonRetryAfter:   "Retry-After too long",
	ReasonDeadline:     "deadline",
	ReasonCanceled:     "canceled",
}

func (r Reason) String() string {
	if r == 0 {
		return "none"
	}
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// MarshalText returns r's name, for encoding/json and expvar.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Error is the error of a request a Transport gave up on. It unwraps to
// every attempt's error, the last's first, and, when the caller's context
// ended the request (ReasonDeadline, ReasonCanceled), to the context's error:
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
	Key      string // the idempotency key sent, the caller's or one added; "" if none

	ctxErr   error     // the caller's context error, when its end or deadline ended the request
	earlier  *[]error  // every attempt's error, in order (the last may be Err); a pointer keeps Error comparable
	timeline *timeline // the request's attempts, if its policy records them
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

// allErrors returns errs, every attempt's error, as Error.earlier holds it.
func allErrors(errs []error) *[]error {
	if len(errs) == 0 {
		return nil
	}
	return &errs
}

// Unwrap returns the last attempt's error, the context's error, and the
// errors of the attempts before, the latest first: errors.Is and errors.As
// reach every attempt's error, and find the last's first.
func (e *Error) Unwrap() []error {
	var earlier []error
	if e.earlier != nil {
		earlier = *e.earlier
	}
	errs := make([]error, 0, 2+len(earlier))
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.ctxErr != nil && !errors.Is(e.Err, e.ctxErr) {
		errs = append(errs, e.ctxErr)
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		if earlier[i] != e.Err {
			errs = append(errs, earlier[i])
		}
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

// attemptTimeoutError is the error of an attempt stopped by AttemptTimeout.
type attemptTimeoutError struct {
	timeout time.Duration
	err     error
}

func (e *attemptTimeoutError) Error() string {
	s := "retryhttp: attempt timeout (" + e.timeout.String() + ")"
	if e.err != nil && e.err != ErrAttemptTimeout {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *attemptTimeoutError) Unwrap() []error {
	if e.err == nil || e.err == ErrAttemptTimeout {
		return []error{ErrAttemptTimeout}
	}
	return []error{ErrAttemptTimeout, e.err}
}

// Timeout reports true, like the other timeouts of net/http.
func (e *attemptTimeoutError) Timeout() bool { return true }
