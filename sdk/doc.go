// Package sdk runs real SDKs over retryhttp against fake services on
// loopback, to check that retryhttp's retries add to an SDK's own instead
// of multiplying them: no request applied twice, no truncated body
// accepted, no call past its deadline, and at least the bare SDK's success.
//
// Everything lives in the tests. README.md holds the figures and the
// commands that produced them. It is a module of its own so that users of
// retryhttp never download the SDKs.
package sdk
