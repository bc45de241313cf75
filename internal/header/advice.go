package header

import (
	"net/http"
	"strings"
)

// Advice is a server's word on retrying its response.
type Advice uint8

// A server's advice.
const (
	AdviceNone Advice = iota
	AdviceNo          // X-Should-Retry: false
	AdviceYes         // X-Should-Retry: true
)

// ShouldRetry reads a server's advice on retrying its response: the
// X-Should-Retry field (as the OpenAI and Anthropic APIs send it, and
// AdviceHandler), else Stripe-Should-Retry (Stripe's). "true" or "false",
// in any letter case; anything else is no advice. f holds the fields of h
// that the Transport reads (Scan).
func ShouldRetry(h http.Header, f Fields) Advice {
	// Canonical names already: no Get, which canonicalizes.
	if f&fShouldRetry != 0 {
		if v := adviceOf(h["X-Should-Retry"]); v != AdviceNone {
			return v
		}
	}
	if f&fStripeShouldRetry == 0 {
		return AdviceNone
	}
	return adviceOf(h["Stripe-Should-Retry"])
}

// adviceOf reads the first value of a should-retry field.
func adviceOf(vs []string) Advice {
	if len(vs) == 0 || vs[0] == "" {
		return AdviceNone
	}
	switch v := strings.Trim(vs[0], " \t"); {
	case strings.EqualFold(v, "false"):
		return AdviceNo
	case strings.EqualFold(v, "true"):
		return AdviceYes
	}
	return AdviceNone
}
