package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// profilesFixture is what cmd/profile writes, for the GET path and one
// opt-in.
const profilesFixture = `# cmd/profile: where retryhttp's CPU time goes, in % of each case's samples
case GET/resp=realistic/lib=retryhttp	ops 49073780	sampled-ms 2970	profile results/profiles/GET_resp=realistic_lib=retryhttp.pprof
share	retryhttp	31.84
share	bench	68.16
share	neither	0.00
frame	11.19	github.com/retryhttp/retryhttp.(*Transport).RoundTrip
frame	3.98	github.com/retryhttp/retryhttp.(*Transport).policyFor
frame	1.99	github.com/retryhttp/retryhttp.(*policy).responseVerdict
frame	1.74	runtime.nanotime	100.00	github.com/retryhttp/retryhttp/internal/clock.MonoNow
frame	1.74	aeshashbody	76.47	github.com/retryhttp/retryhttp.headerValue
frame	1.24	net/http.(*Request).Context	100.00	github.com/retryhttp/retryhttp.(*Transport).RoundTrip
case OptIns/resp=realistic/lib=retryhttp-throttle	ops 18951786	sampled-ms 3010	profile results/profiles/x.pprof
share	retryhttp	79.90
share	bench	19.62
share	neither	0.48
frame	23.21	runtime.nanotime	100.00	github.com/retryhttp/retryhttp/internal/clock.MonoNow
`

func writeProfiles(t *testing.T, text string) (profiles, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profiles.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return parseProfiles(path)
}

// Under each path's table, a paragraph for each of its libraries that was
// profiled: the shares of retryhttp, the bench and neither, then the top 5
// frames of retryhttp's by flat time, a frame of another package with the
// retryhttp function it came from; lines of at most 100 columns. A path or
// library not profiled gets none, and without profiles the method says
// nothing of them.
func TestProfileNotes(t *testing.T) {
	ps, err := writeProfiles(t, profilesFixture)
	if err != nil {
		t.Fatal(err)
	}
	lines := sample("GET", realistic, "retryhttp", 90, 0, 0) + sample("GET", realistic, "bare", 30, 0, 0)
	r := report{cpu: writeSamples(t, lines), prof: ps}
	r.pathTable("GET", perfLibs)
	r.profileNote("GET", "retryhttp", "bare")
	got := r.buf.String()
	table, note, ok := strings.Cut(got, "\n\n")
	if !ok || !strings.HasPrefix(table, "| library |") || strings.Contains(note, "| ") {
		t.Fatalf("want the table, then the note:\n%s", got)
	}
	flat := strings.Join(strings.Fields(note), " ")
	for _, want := range []string{
		"*Where retryhttp's time goes* (a CPU profile of its row, realistic answers, 297 samples)",
		"32 % in its code and what it calls, 68 % in the bench's base and caller, 0 % in neither (GC workers, scheduler).",
		"Its top 5 frames by flat time, in % of all the samples: `retryhttp.(*Transport).RoundTrip` 11 %, " +
			"`retryhttp.(*Transport).policyFor` 4.0 %, `retryhttp.(*policy).responseVerdict` 2.0 %, " +
			"`runtime.nanotime` 1.7 % (from `retryhttp/internal/clock.MonoNow`), " +
			"`aeshashbody` 1.7 % (76 % of it from `retryhttp.headerValue`).",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the note lacks %q:\n%s", want, note)
		}
	}
	if strings.Contains(note, "Context") || strings.Contains(note, "bare's") {
		t.Errorf("a sixth frame, or a note for a library not profiled:\n%s", note)
	}
	for _, l := range strings.Split(note, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 || strings.HasPrefix(l, "%") {
			t.Errorf("a line of %d columns, or one that starts with a %% sign: %s", n, l)
		}
	}

	// The opt-ins section: a note for the opt-in profiled, none for the
	// others.
	r = report{cpu: writeSamples(t, optInSample("retryhttp-throttle", 300, 0, 0)), prof: ps}
	r.optInSection()
	if got := strings.Join(strings.Fields(r.buf.String()), " "); strings.Count(got, "*Where ") != 1 ||
		!strings.Contains(got, "*Where retryhttp-throttle's time goes* (a CPU profile of its row, realistic answers, 301 samples)") ||
		!strings.Contains(got, "Its top frame by flat time, in % of all the samples: `runtime.nanotime` 23 %") {
		t.Errorf("the opt-ins section's notes:\n%s", got)
	}

	// The method describes the profiles only when there are some.
	r = report{prof: ps}
	r.profileMethod()
	if !strings.Contains(r.buf.String(), "### CPU profiles") {
		t.Errorf("no method of the profiles:\n%s", r.buf.String())
	}
	none, err := parseProfiles("")
	if err != nil || len(none) != 0 {
		t.Fatalf("no file: %v, %v", none, err)
	}
	r = report{prof: none}
	r.profileMethod()
	r.profileNote("GET", "retryhttp")
	if r.buf.Len() != 0 {
		t.Errorf("without profiles:\n%s", r.buf.String())
	}
}

// A line that is none of cmd/profile's, or comes before any case, is an
// error.
func TestParseProfilesErrors(t *testing.T) {
	for _, text := range []string{
		"share\tretryhttp\t10\n",
		"case GET/resp=realistic/lib=retryhttp\tsampled-ms 10\nframe\tten\tx\n",
		"case GET/resp=realistic/lib=retryhttp\tsampled-ms 10\nsomething else\n",
	} {
		if _, err := writeProfiles(t, text); err == nil {
			t.Errorf("%q parsed without an error", text)
		}
	}
}
