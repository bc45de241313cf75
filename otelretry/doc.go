// Package otelretry reports what a retryhttp.Transport does as OpenTelemetry
// traces and metrics.
//
// It lives in a module of its own so that users of retryhttp who do not use
// OpenTelemetry never download it: the retryhttp core knows nothing of
// OpenTelemetry and offers what this package needs through its hooks
// (OnRetry, OnGiveUp), the attempt number any base transport can read
// (retryhttp.AttemptNumber) and the error names its logs give.
//
// NewTransport instruments a Transport before its first use:
//
//	t := &retryhttp.Transport{Policy: retryhttp.Policy{MaxAttempts: 3}}
//	client := &http.Client{Transport: otelretry.NewTransport(t)}
//
// # Traces
//
// Each attempt gets a CLIENT span from otelhttp; a retry's carries
// http.request.resend_count (1 on the second attempt, 2 on the third), the
// first attempt's none, as the HTTP semantic conventions ask. A request
// that succeeds at once, or whose answer the policy does not retry (a 404),
// has that span alone: its trace is what otelhttp alone would make, and
// otelretry adds no span to it.
//
// A request (a logical one, however many attempts it takes) that the
// Transport retries, hedges or gives up on gets an INTERNAL span of its
// own, named "retryhttp {method}", made at the first retry, hedge or
// give-up. It starts when the first attempt's span did (with the SDK's
// spans, which tell their start; without a span of the first attempt's, or
// with another tracer, when it is made), so it covers the request, and it
// is a child of the span in the request's context, linked to the first
// attempt's span; the attempts sent after it is made are its children (the
// first one too, in the rare race where a hedge's span is made before the
// first attempt goes; a hedge due before the first attempt's span is known
// waits for it). A request with no span in its context has its attempts tied
// into one trace instead: the request's span is then the first attempt's
// child. A retry, hedge or give-up is rare beside a request that succeeds,
// so a trace pays for otelretry's span only where it tells something: the
// waits, the reason for giving up, and the attempts as one request.
//
//	caller's span
//	├── HTTP GET            CLIENT    attempt 1 (otelhttp)                     503
//	└── retryhttp GET       INTERNAL  from attempt 1's start; link: attempt 1
//	    ├── HTTP GET        CLIENT    attempt 2, http.request.resend_count=1   503
//	    └── HTTP GET        CLIENT    attempt 3, http.request.resend_count=2   200
//
// The request's span carries http.request.method, server.address and
// server.port from its start; retryhttp.attempts (the attempts sent) and
// http.response.status_code, or error.type, at the end. It has an event
// "retryhttp.retry" for each wait before a retry, stamped when the wait
// began, one "retryhttp.hedge" for each hedge, stamped as it goes, and an
// event "retryhttp.give_up" when the Transport gives up,
// which also sets the span's status to Error (as does a request that ends
// with an error). Its events and status belong to the request, not to the
// caller's operation, which may well recover from a request that failed.
//
// Like otelhttp's spans, the request's span ends when the response body is
// closed or read to its end, so it covers its attempts; a request that
// returns an error ends it at once.
//
// # Metrics
//
// The metrics count what the Transport decides; otelhttp measures each
// attempt under OpenTelemetry's own http.client.* names as usual.
// retryhttp.attempts is an asynchronous counter: the request path adds to
// an atomic count, which the counter reports when a reader collects (so its
// points have no exemplars). Names
// live in the retryhttp namespace, as the semantic conventions advise for
// names they do not define, so they can never clash with http.client.*:
//
//	retryhttp.attempts            {attempt}  attempts sent, by outcome
//	retryhttp.retries             {retry}    attempts after a failed one
//	retryhttp.hedges              {attempt}  hedges sent (no retries)
//	retryhttp.give_ups            {request}  requests that failed, by reason
//	retryhttp.budget.waits        {retry}    retries that waited for the budget, then went
//	retryhttp.budget.denials      {request}  requests given up on for the budget
//	retryhttp.throttle.rejections {request}  requests throttling rejected in the client
//	retryhttp.retry.delay         s          the wait before each retry (histogram)
//
// Every one has http.request.method and server.address. An attempt has
// retryhttp.status_class ("2xx" .. "5xx") when a response came back, else
// error.type (the names of the core's logs: timeout, connection_refused,
// ...); a give-up has retryhttp.reason (retryhttp.Reason's text); a delay
// has retryhttp.delay_source (retryhttp.RetryEvent's Source). server.address
// takes at most
// DefaultMaxHosts values (WithMaxHosts): the hosts seen first keep their
// names, the others are counted as "_OTHER". A method outside the known ones
// (those of RFC 9110 and PATCH, or WithKnownMethods) is "_OTHER".
package otelretry
