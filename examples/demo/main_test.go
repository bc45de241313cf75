package main

import (
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestDemoShowsEachScene runs the demo and checks each scene's row: the
// attempts, connections and outcome it exists to show.
func TestDemoShowsEachScene(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	demo(&out)
	text := out.String()
	rows := []struct{ scene, want string }{
		{"503s", `GET /unavailable-twice\s+3\s+1\s.*200 OK`},
		{"reset", `GET /reset-once\s+2\s+2\s.*connection reset.*200 OK`},
		{"429", `GET /rate-limited\s+2\s+1\s+1\.\d+s \(Retry-After.*200 OK`},
		{"hung", `GET /hang-once\s+2\s+2\s.*attempt timeout.*200 OK`},
		{"not found", `GET /missing\s+1\s+1\s.*404 Not Found`},
		{"POST, no key", `POST /charge-503\s+1\s+1\s.*503 .*gave up: not idempotent`},
		{"POST, key", `POST /charge \(lost response\)\s+2\s+2\s.*200 OK charged once .*1 charge in all`},
		{"outage, no budget", `none \(unlimited\)\s+4000\s+4\.00`},
		{"outage, budget", `default \(20% \+ 10/s\)\s+1300\s+1\.30`},
	}
	for _, r := range rows {
		if !regexp.MustCompile(r.want).MatchString(text) {
			t.Errorf("scene %q: no line matches %q in:\n%s", r.scene, r.want, text)
		}
	}
}
