// Package header reads what a Transport reads of header fields: the wait a
// failed answer asks for (Retry-After, read leniently, its millisecond
// forms, RateLimit, X-RateLimit-Reset), the server's advice on retrying
// (X-Should-Retry), the caller's idempotency key, and the attempt headers
// of SDKs that retry by themselves. Each function takes a header and
// returns a value; none keeps anything.
package header
