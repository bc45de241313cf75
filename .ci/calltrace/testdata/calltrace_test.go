package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/retryhttp/retryhttp/internal/calltrace"
)

// TestCallTrace traces a GET answered 503 then 200 through the default
// Transport (its first use made already) over an in-memory base, its
// answers realistic (a few header fields, a small body), and prints what
// .ci/calltrace reports.
func TestCallTrace(t *testing.T) {
	n := 0
	base := roundTripper(func(req *http.Request) (*http.Response, error) {
		n++
		code, body := 503, `{"error":"service unavailable"}`
		if n > 1 {
			code, body = 200, `{"id":1,"name":"item"}`
		}
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {fmt.Sprint(n)}}
		return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: req}, nil
	})
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
	warm, _ := http.NewRequest(http.MethodGet, "http://api.test/things/0", nil)
	n = 1 // the Transport's first use (its set-up): answered 200
	if resp, err := tr.RoundTrip(warm); err == nil {
		resp.Body.Close()
	}
	n = 0
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/things/1", nil)
	calltrace.Start()
	resp, err := tr.RoundTrip(req)
	events := calltrace.Stop()
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	calls, switches := 0, 0
	files := map[string]int{}
	var stack []string // files of the functions entered and not left
	cur := ""
	for _, e := range events {
		if e.Return {
			stack = stack[:len(stack)-1]
		} else {
			calls++
			files[e.File]++
			stack = append(stack, e.File)
		}
		top := ""
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != "" && cur != "" && top != cur {
			switches++
		}
		if top != "" {
			cur = top
		}
		if os.Getenv("CALLTRACE_VERBOSE") == "true" && !e.Return {
			fmt.Printf("%s%s %s\n", strings.Repeat("  ", len(stack)-1), e.File, e.Func)
		}
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	fmt.Printf("a GET answered 503 then 200: %d calls, %d files, %d file switches\n", calls, len(files), switches)
	for _, f := range names {
		fmt.Printf("  %-28s %3d calls\n", f, files[f])
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
