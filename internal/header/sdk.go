package header

import (
	"net/http"
	"strconv"
	"strings"
)

// SDKAttempt returns the attempt number an SDK above wrote in h: 2 or
// more for its retries, 0 when h says nothing.
func SDKAttempt(h http.Header) int {
	if len(h) == 0 {
		return 0
	}
	if v := h["Amz-Sdk-Request"]; len(v) > 0 {
		if n := parseAmzAttempt(v[0]); n > 0 {
			return n
		}
	}
	if v := h["X-Stainless-Retry-Count"]; len(v) > 0 {
		if n, err := strconv.Atoi(strings.TrimSpace(v[0])); err == nil && n >= 0 && n < 1<<20 {
			return n + 1
		}
	}
	return 0
}

// parseAmzAttempt returns the attempt of an amz-sdk-request value, a list
// of key=value pairs separated by semicolons ("attempt=2; max=3"), or 0.
func parseAmzAttempt(v string) int {
	for v != "" {
		var pair string
		pair, v, _ = strings.Cut(v, ";")
		key, val, ok := strings.Cut(pair, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "attempt") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 1 || n > 1<<20 { // an attempt up to 1<<20, as the retry count gives
			return 0
		}
		return n
	}
	return 0
}
