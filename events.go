package retryhttp

import (
	"net/http"
	"strconv"
	"time"
)

// What a Transport's hooks are told: OnRetry of a retry or hedge about to
// happen, OnGiveUp of a request that ended with a failure. Each is a struct
// behind a pointer, so that it can grow.

// A RetryEvent describes a retry about to happen.
type RetryEvent struct {
	Request  *http.Request  // the caller's request
	Attempt  int            // the attempt that failed: 1 for the first
	Response *http.Response // its response, or nil; the body is not to be read
	Err      error          // its error, or nil
	Delay    time.Duration  // from the failure until the next attempt goes, BudgetWait included
	// Source says what set Delay: "backoff" (the policy's Backoff),
	// "Retry-After" or "RateLimit" (the server's wait, from the field of
	// that name or X-RateLimit-Reset for RateLimit), or "hedge".
	Source string

	// Hedge is set when the attempt about to be sent is a hedge: a copy
	// sent while attempt Attempt has not answered yet, after Delay, with
	// Source "hedge".
	Hedge bool

	// BudgetWait is the part of Delay the retry spent in its host's line
	// (see Budget), over when OnRetry runs; 0 when the budget's credit
	// paid for it at once, or the server timed it. A wait in line counts
	// toward its backoff.
	BudgetWait time.Duration
}

// A GiveUpEvent describes a request that ended with a failure.
type GiveUpEvent struct {
	Request  *http.Request  // the caller's request
	Attempts int            // attempts made
	Reason   Reason         // why no further attempt was made
	Response *http.Response // the response returned, or nil
	Err      error          // the error returned, or nil

	// BudgetWait is how long the request's retries waited for the budget,
	// in all. With ReasonBudget after a wait, the line had not let the
	// retry go when the request's schedule ran out (or its deadline came
	// near).
	BudgetWait time.Duration
}

// delaySource says what set the wait before a retry: RetryEvent.Source.
type delaySource uint8

// The sources of a wait.
const (
	delayBackoff    delaySource = iota // the policy's Backoff
	delayRetryAfter                    // the response's Retry-After field
	delayRateLimit                     // RateLimit (its t parameter) or X-RateLimit-Reset
	delayHedge                         // the hedge delay (Policy.Hedge)
)

func (s delaySource) String() string {
	switch s {
	case delayBackoff:
		return "backoff"
	case delayRetryAfter:
		return "Retry-After"
	case delayRateLimit:
		return "RateLimit"
	case delayHedge:
		return "hedge"
	}
	return "delaySource(" + strconv.Itoa(int(s)) + ")"
}
