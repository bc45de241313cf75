// Command demo starts a local server that fails the way real dependencies
// do and sends requests to it through retryhttp, printing what each request
// went through: its attempts, the waits between them, and the outcome.
//
//	go run ./examples/demo
//
// Everything runs on the loopback interface and ends within seconds.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

func main() {
	demo(os.Stdout)
}

// demo runs every scene and writes the tables to out.
func demo(out io.Writer) {
	scenesTable(out)
	outage(out, nil)
}

// scenesTable runs the scenes, each a request to the flaky server, and
// writes their table.
func scenesTable(out io.Writer) {
	srv := newFlakyServer()
	defer srv.Close()

	fmt.Fprintln(out, "retryhttp demo: requests to a local server that fails transiently")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Each request goes through its own retryhttp.Transport: up to 4 attempts, and before each")
	fmt.Fprintln(out, "retry a backoff (a random wait, here under 50 ms before the first retry, doubling after)")
	fmt.Fprintln(out, "or the wait the server asked for (Retry-After).")
	fmt.Fprintln(out)
	rows := []string{fmt.Sprintf(sceneRow, "SCENE", "REQUEST", "ATTEMPTS", "CONNS", "OUTCOME"),
		fmt.Sprintf(sceneRow, "-----", "-------", "--------", "-----", "-------")}
	for _, s := range scenes(srv.URL) {
		before := len(srv.Requests())
		r := s.run()
		conns := map[int]bool{}
		for _, req := range srv.Requests()[before:] {
			conns[req.Conn] = true
		}
		rows = append(rows, fmt.Sprintf(sceneRow, s.name, s.label, strconv.Itoa(r.attempts), strconv.Itoa(len(conns)), r.outcome))
		if r.detail != "" {
			rows = append(rows, strings.Repeat(" ", sceneIndent)+r.detail)
		}
	}
	for _, r := range rows {
		fmt.Fprintln(out, strings.TrimRight(r, " "))
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "CONNS counts the connections the server saw: a failed attempt's response is drained")
	fmt.Fprintln(out, "so that the next attempt reuses its connection; a reset or hung attempt needs a new one.")
	fmt.Fprintln(out, "POST is retried only with an idempotency key: POST /charge charges, then loses its")
	fmt.Fprintln(out, "response; the retry carries the same key and is answered from the server's record.")
	fmt.Fprintln(out)
}

// sceneRow lays out a row of the scenes' table; a scene's waits and
// give-up reason go on a line of their own below it, indented by
// sceneIndent.
const (
	sceneRow    = "%-12s  %-22s  %-8s  %-5s  %s"
	sceneIndent = 14
)

// scene is one request sent through a Transport with its own policy.
type scene struct {
	name, label string
	policy      retryhttp.Policy
	newRequest  func() *http.Request
}

type row struct {
	attempts int
	outcome  string // the status and body, or the error
	detail   string // the waits before the retries, and why the request gave up
}

func scenes(url string) []scene {
	fast := retryhttp.FullJitter{Base: 50 * time.Millisecond, Cap: time.Second}
	get := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, url+path, nil)
			return req
		}
	}
	post := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(`{"amount":1000}`))
			return req
		}
	}
	return []scene{
		{"503s", "GET /unavailable-twice", retryhttp.Policy{Backoff: fast}, get("/unavailable-twice")},
		{"reset", "GET /reset-once", retryhttp.Policy{Backoff: fast}, get("/reset-once")},
		{"429", "GET /rate-limited", retryhttp.Policy{Backoff: fast}, get("/rate-limited")},
		{"hung", "GET /hang-once", retryhttp.Policy{Backoff: fast, AttemptTimeout: 200 * time.Millisecond}, get("/hang-once")},
		{"not found", "GET /missing", retryhttp.Policy{Backoff: fast}, get("/missing")},
		{"POST, no key", "POST /charge-503", retryhttp.Policy{Backoff: fast}, post("/charge-503")},
		{"POST, key", "POST /charge", retryhttp.Policy{
			Backoff: fast, IdempotencyKeys: &retryhttp.IdempotencyKeys{},
		}, post("/charge")},
	}
}

// run sends the scene's request through a new Transport, whose nil Base
// means a pooled transport of its own: no connection is shared between
// scenes, so each scene's first attempt opens a fresh one.
func (s scene) run() row {
	var details []string
	var gaveUp string
	tr := &retryhttp.Transport{
		Policy: s.policy,
		OnGiveUp: func(e *retryhttp.GiveUpEvent) {
			gaveUp = "gave up: " + e.Reason.String()
		},
		OnRetry: func(e *retryhttp.RetryEvent) {
			details = append(details, fmt.Sprintf("%s (%s) after %s", round(e.Delay), e.Source, what(e.Response, e.Err)))
		},
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var r row
	defer client.CloseIdleConnections()
	resp, err := client.Do(s.newRequest())
	if err != nil {
		var e *retryhttp.Error
		if errors.As(err, &e) {
			r.attempts = e.Attempts
		}
		r.outcome = "error: " + err.Error()
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.attempts = retryhttp.Attempts(resp)
		r.outcome = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	if len(details) > 0 {
		details[0] = "waited " + details[0]
	}
	if gaveUp != "" {
		details = append(details, gaveUp)
	}
	r.detail = strings.Join(details, ", ")
	return r
}

// The outage scene: steady traffic through two Transports side by side,
// one without a budget and one with the default budget, to an endpoint that
// answers 503 for a while and then 200 again.
const (
	outageRate   = 200                    // requests per second through each Transport
	outageBefore = 200 * time.Millisecond // up, then
	outageDown   = 1500 * time.Millisecond
	outageAfter  = 500 * time.Millisecond // up again
)

// outageBackoff is the scene's backoff: its whole schedule (3 retries, at
// most 70 ms) is a small part of the outage, as a second's schedule is of
// an outage of a minute.
var outageBackoff = retryhttp.FullJitter{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}

// A call is one request of the outage scene.
type call struct {
	sent, ended time.Duration // since the scene began
	ok          bool          // served: 200
}

// outageSide is what one Transport's callers and the server saw.
type outageSide struct {
	calls    []call
	arrivals []time.Duration // at the server, since the scene began
}

// A network makes the outage scene's server and connects its clients to
// it. The tests run the scene on an in-memory one, in fake time
// (testing/synctest), where the load keeps to its schedule.
type network interface {
	NewServer(http.Handler) *httptest.Server
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// outage runs the outage scene on net (nil: loopback) and writes its
// table.
func outage(out io.Writer, net network) {
	sides := []struct {
		name   string
		path   string
		budget *retryhttp.Budget
	}{
		{"NO BUDGET", "/outage/none", retryhttp.UnlimitedBudget()},
		{"DEFAULT BUDGET", "/outage/budget", nil},
	}
	results := make([]outageSide, len(sides))
	var mu sync.Mutex
	var start time.Time // set before the first request
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since := time.Since(start)
		mu.Lock()
		for i, s := range sides {
			if r.URL.Path == s.path {
				results[i].arrivals = append(results[i].arrivals, since)
			}
		}
		mu.Unlock()
		if whileDown(since) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	var srv *httptest.Server
	if net == nil {
		srv = httptest.NewServer(h)
	} else {
		srv = net.NewServer(h)
	}

	start = time.Now()
	var wg sync.WaitGroup
	for i, s := range sides {
		wg.Go(func() {
			tr := &retryhttp.Transport{Budget: s.budget, Policy: retryhttp.Policy{Backoff: outageBackoff}}
			if net != nil {
				tr.Base = &http.Transport{DialContext: net.DialContext, MaxIdleConnsPerHost: 100}
			}
			client := &http.Client{Transport: tr}
			defer client.CloseIdleConnections()
			results[i].calls = steady(client, srv.URL+s.path, start)
		})
	}
	wg.Wait()
	srv.Close() // and waits for the handlers: every arrival is recorded

	fmt.Fprintf(out, "Outage: %d GETs a second through each of two Transports; the endpoint answers 503 for\n", outageRate)
	fmt.Fprintf(out, "%v, longer than a request's whole backoff schedule (here at most %v), then 200 again.\n",
		outageDown, 7*outageBackoff.Base)
	fmt.Fprintln(out, "One Transport has no budget. The other has the default budget, which bounds each host's")
	fmt.Fprintf(out, "retries: a retry spends one of its credit (%d retries, earning %.2g of one per success and\n",
		retryhttp.DefaultBudgetCredit, retryhttp.DefaultBudgetRatio)
	fmt.Fprintln(out, "refilling in 10 s). While other requests to the host fail, a retry waits in the host's line")
	fmt.Fprintln(out, "instead: one goes now and then as a probe, and the host's first success lets the line go.")
	fmt.Fprintln(out, "A request alone gets its backoff, as in the scenes above.")
	fmt.Fprintln(out)
	rows := []struct {
		label string
		value func(outageSide) string
	}{
		{"", nil},
		{"requests sent while it was down", func(s outageSide) string { return strconv.Itoa(s.count(whileDown)) }},
		{"attempts it got while down, per request sent", func(s outageSide) string {
			return fmt.Sprintf("%.2f", float64(s.arrivedWhileDown())/float64(s.count(whileDown)))
		}},
		{"requests sent while down, served in the end", func(s outageSide) string { return strconv.Itoa(s.served(whileDown)) }},
		{"requests sent once it was back, served", func(s outageSide) string {
			return fmt.Sprintf("%d/%d", s.served(onceBack), s.count(onceBack))
		}},
	}
	for _, r := range rows {
		line := fmt.Sprintf("%-51s", r.label)
		for i, s := range sides {
			if r.value == nil {
				line += fmt.Sprintf("  %14s", s.name)
			} else {
				line += fmt.Sprintf("  %14s", r.value(results[i]))
			}
		}
		fmt.Fprintln(out, line)
	}
}

// steady sends outageRate GETs a second to url through client for the
// whole scene, the i-th at start plus i gaps, and returns how each went.
func steady(client *http.Client, url string, start time.Time) []call {
	n := int((outageBefore + outageDown + outageAfter) * outageRate / time.Second)
	calls := make([]call, n)
	var wg sync.WaitGroup
	for i := range calls {
		at := time.Duration(i) * time.Second / outageRate
		time.Sleep(time.Until(start.Add(at)))
		wg.Go(func() {
			c := &calls[i]
			c.sent = at
			resp, err := client.Get(url)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				c.ok = resp.StatusCode == http.StatusOK
			}
			c.ended = time.Since(start)
		})
	}
	wg.Wait()
	return calls
}

// Phases of the outage scene, by when a request was due to be sent.
func whileDown(at time.Duration) bool { return at >= outageBefore && at < outageBefore+outageDown }
func onceBack(at time.Duration) bool  { return at >= outageBefore+outageDown }

// count returns the requests sent in a phase.
func (s outageSide) count(phase func(time.Duration) bool) int {
	n := 0
	for _, c := range s.calls {
		if phase(c.sent) {
			n++
		}
	}
	return n
}

// served returns the requests sent in a phase that were served.
func (s outageSide) served(phase func(time.Duration) bool) int {
	n := 0
	for _, c := range s.calls {
		if phase(c.sent) && c.ok {
			n++
		}
	}
	return n
}

// arrivedWhileDown returns the attempts that reached the server while the
// endpoint was down.
func (s outageSide) arrivedWhileDown() int {
	n := 0
	for _, a := range s.arrivals {
		if whileDown(a) {
			n++
		}
	}
	return n
}

// newFlakyServer returns a loopback server whose endpoints fail in
// scripted ways (see package retryhttptest), so each scene meets the same
// failures on every run.
func newFlakyServer() *rt.Server {
	ok := rt.Status(200).WithBody("ok\n")
	srv := rt.NewServer(rt.Sequence(rt.Status(404).WithBody("no such endpoint\n")))
	srv.Route("/unavailable-twice", rt.Sequence(rt.Status(503), rt.Status(503), ok))
	srv.Route("/reset-once", rt.Sequence(rt.Reset(), ok))
	srv.Route("/rate-limited", rt.Sequence(rt.Status(429).WithHeader("Retry-After", "1"), ok))
	srv.Route("/hang-once", rt.Sequence(rt.Hang(), ok))
	srv.Route("/charge-503", rt.Sequence(rt.Status(503).WithBody("try later\n")))
	// The payments endpoint honours Idempotency-Key. It charges on the first
	// request and loses that response on the way back; a retry with the same
	// key is answered from its record, without a second charge.
	l := &ledger{charged: map[string]bool{}}
	srv.Route("/charge", rt.Sequence(rt.ApplyThenDrop(l), rt.Respond(l)))
	return srv
}

type ledger struct {
	mu      sync.Mutex
	charged map[string]bool // idempotency key -> applied
	charges int
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	if key == "" || !l.charged[key] {
		l.charged[key] = true
		l.charges++
	}
	n := l.charges
	l.mu.Unlock()
	fmt.Fprintf(w, "charged: %d charge in all, key %.8s…\n", n, key)
}

func what(resp *http.Response, err error) string {
	if err != nil {
		s := err.Error()
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
		return s
	}
	return strconv.Itoa(resp.StatusCode)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
