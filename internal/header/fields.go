package header

import "net/http"

// Fields says which of the fields that a failed answer's verdict and
// wait are read from its header holds: a scan of a small header's names
// finds them, where a lookup of each of the ten would cost a failed answer
// more (a realistic header has six to ten fields, and holds none of them,
// or one). Each is then looked up as before, if present. allFields stands
// for a header too long to scan: each is looked up.
type Fields uint16

const (
	fRetryAfterMs Fields = 1 << iota // these three in serverWait's order
	fMsRetryAfterMs
	fAmzRetryAfter
	fRetryAfter
	fRateLimit
	fXRateLimitRemaining
	fXRateLimitReset
	fShouldRetry
	fStripeShouldRetry
	EnvoyOverloaded
	fScanned // the header was scanned: the bits are known (see Fields.of)

	waitFields = fRetryAfterMs | fMsRetryAfterMs | fAmzRetryAfter | fRetryAfter | fRateLimit | fXRateLimitRemaining | fXRateLimitReset
	allFields  = fScanned<<1 - 1

	maxScan = 16 // the longest header scanned rather than looked up in
)

// Of returns the fields of h that a retry's decisions read: *f if h was
// scanned already (f not zero), else the scan's, kept in *f.
func (f *Fields) Of(h http.Header) Fields {
	if *f == 0 {
		*f = Scan(h)
	}
	return *f
}

// Scan returns the fields of h that a retry's decisions read.
func Scan(h http.Header) Fields {
	if len(h) > maxScan {
		return allFields
	}
	f := fScanned
	for k := range h {
		switch len(k) { // most names are none of these lengths
		case 9, 11, 14, 17, 18, 19, 21:
		default:
			continue
		}
		switch k {
		case "Retry-After-Ms":
			f |= fRetryAfterMs
		case "X-Ms-Retry-After-Ms":
			f |= fMsRetryAfterMs
		case "X-Amz-Retry-After":
			f |= fAmzRetryAfter
		case "Retry-After":
			f |= fRetryAfter
		case "Ratelimit":
			f |= fRateLimit
		case "X-Ratelimit-Remaining":
			f |= fXRateLimitRemaining
		case "X-Ratelimit-Reset":
			f |= fXRateLimitReset
		case "X-Should-Retry":
			f |= fShouldRetry
		case "Stripe-Should-Retry":
			f |= fStripeShouldRetry
		case "X-Envoy-Overloaded":
			f |= EnvoyOverloaded
		}
	}
	return f
}
