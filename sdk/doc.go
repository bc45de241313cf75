// Package sdk runs real SDKs over retryhttp against fake services on
// loopback, to check that retryhttp stands down beneath an SDK that retries
// on its own: attempts add rather than multiply, nothing is applied twice,
// and no body goes out cut short.
//
// Everything lives in the tests; README.md holds the figures and the
// commands that produce them. It is a module of its own so that users of
// retryhttp never download the SDKs.
package sdk
