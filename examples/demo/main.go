// Command demo starts a local server that fails the way real dependencies
// do and sends requests to it through retryhttp, printing what each request
// went through: its attempts, the waits between them, and the outcome.
// Then an outage scene sends steady traffic through two Transports, one
// without a retry budget and one with the default budget, to an endpoint
// that answers 503 for a while, and compares what the endpoint got and
// what the callers got.
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

	fmt.Fprintln(out, "retryhttp demo: requests through retryhttp to a local server that fails on purpose")
	fmt.Fprintln(out)
	for _, l := range []string{
		"A retryhttp.Transport sends a request again when an attempt (one sending of it) fails in a way",
		"that may pass: a 503 or 429 status, a reset connection, no answer in time. It makes up to 4",
		"attempts. Before each retry it waits a backoff, a random wait (here under 50 ms before the",
		"first retry, under twice as long before each next one), or, if the server said how long in a",
		"Retry-After header, that long and up to 10 % more, so that clients told the same time do not",
		"all come back at once.",
		"",
		"A POST is sent again only if none of it reached the server, or with an idempotency key: a",
		"header, the same on each attempt, by which the server knows a repeat and answers it from its",
		"record instead of charging twice. The last scene's Transport adds one (Policy.IdempotencyKeys).",
		"",
		"Each scene is one request through a Transport of its own. ATTEMPTS counts the attempts the",
		"server got, CONNS the connections they came on: a failed attempt's answer is read to its end so",
		"that the next attempt can reuse its connection; after a reset or a hang it needs a new one.",
		"",
	} {
		fmt.Fprintln(out, l)
	}
	rows := []string{fmt.Sprintf(sceneRow, "SCENE", "REQUEST", "ATTEMPTS", "CONNS", "OUTCOME"),
		fmt.Sprintf(sceneRow, "-----", "-------", "--------", "-----", "-------")}
	var last scene
	var lastRow row
	for _, s := range scenes(srv.URL) {
		before := len(srv.Requests())
		r := s.run()
		last, lastRow = s, r
		conns := map[int]bool{}
		for _, req := range srv.Requests()[before:] {
			conns[req.Conn] = true
		}
		rows = append(rows, fmt.Sprintf(sceneRow, s.name, s.label, strconv.Itoa(r.attempts), strconv.Itoa(len(conns)), r.outcome))
		for _, d := range []string{s.note, r.detail} {
			if d != "" {
				rows = append(rows, strings.Repeat(" ", sceneIndent)+d)
			}
		}
	}
	for _, r := range rows {
		fmt.Fprintln(out, strings.TrimRight(r, " "))
	}
	fmt.Fprintln(out)
	printTimeline(out, last, lastRow.timeline)
}

// sceneRow lays out a row of the scenes' table; a scene's waits and
// give-up reason, and its note, go on lines of their own below it,
// indented by sceneIndent.
const (
	sceneRow    = "%-12s  %-22s  %-8s  %-5s  %s"
	sceneIndent = 14
)

// scene is one request sent through a Transport with its own policy.
type scene struct {
	name, label string
	policy      retryhttp.Policy
	newRequest  func() *http.Request
	note        string // what the outcome means, if its waits do not say; printed above them
}

type row struct {
	timeline []retryhttp.Attempt
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
		{"503s", "GET /unavailable-twice", retryhttp.Policy{Backoff: fast}, get("/unavailable-twice"), ""},
		{"reset", "GET /reset-once", retryhttp.Policy{Backoff: fast}, get("/reset-once"), ""},
		{"429", "GET /rate-limited", retryhttp.Policy{Backoff: fast}, get("/rate-limited"), ""},
		{"hung", "GET /hang-once", retryhttp.Policy{Backoff: fast, AttemptTimeout: 200 * time.Millisecond},
			get("/hang-once"), "its Transport gives each attempt 200 ms (Policy.AttemptTimeout)"},
		{"not found", "GET /missing", retryhttp.Policy{Backoff: fast}, get("/missing"),
			"not retried: a 404 is an answer, not a failure that may pass"},
		{"POST, no key", "POST /charge-503", retryhttp.Policy{Backoff: fast}, post("/charge-503"),
			"a POST without a key is sent once: sent again, it might charge twice"},
		{"POST, key", "POST /charge", retryhttp.Policy{
			Backoff: fast, IdempotencyKeys: &retryhttp.IdempotencyKeys{},
		}, post("/charge"), "the server charged, then reset the connection before answering"},
	}
}

// run sends the scene's request through a new Transport, whose nil Base
// means a pooled transport of its own: no connection is shared between
// scenes, so each scene's first attempt opens a fresh one. The request's
// timeline (Policy.Timeline) tells its waits.
func (s scene) run() row {
	p := s.policy
	p.Timeline = true
	client := &http.Client{Transport: &retryhttp.Transport{Policy: p}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var r row
	resp, err := client.Do(s.newRequest())
	r.timeline = retryhttp.Timeline(resp, err)
	r.attempts = len(r.timeline)
	var gaveUp retryhttp.Reason
	if err != nil {
		var e *retryhttp.Error
		if errors.As(err, &e) {
			gaveUp = e.Reason
		}
		r.outcome = "error: " + err.Error()
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		gaveUp = retryhttp.StopReason(resp)
		r.outcome = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var details []string
	for i, a := range r.timeline[1:] {
		source := a.Source
		if prev := r.timeline[i].Response; a.Source == "Retry-After" {
			source += ": " + prev.Header.Get("Retry-After") + ", plus up to 10 %"
		}
		details = append(details, fmt.Sprintf("%s (%s) after %s", round(a.Wait), source, what(r.timeline[i])))
	}
	if len(details) > 0 {
		details[0] = "waited " + details[0]
	}
	if gaveUp != 0 {
		details = append(details, "gave up: "+gaveUp.String())
	}
	r.detail = strings.Join(details, ", ")
	return r
}

// printTimeline writes the timeline of a scene's request, one attempt a
// line: when it went, the wait before it, how long it took, what came back
// and the key it carried.
func printTimeline(out io.Writer, s scene, tl []retryhttp.Attempt) {
	fmt.Fprintf(out, "The last scene's request, %s, as retryhttp.Timeline tells it (Policy.Timeline):\n", s.label)
	const row = "  %-8s  %-6s  %-15s  %-5s  %-25s  %s\n"
	fmt.Fprintf(out, row, "ATTEMPT", "START", "WAIT BEFORE", "TOOK", "OUTCOME", "KEY")
	for _, a := range tl {
		wait := "-"
		if a.Source != "" {
			wait = fmt.Sprintf("%s (%s)", round(a.Wait), a.Source)
		}
		key := a.Key
		if len(key) > 8 {
			key = key[:8] + "…"
		}
		fmt.Fprintf(out, row, strconv.Itoa(a.Number), "+"+round(a.Start.Sub(tl[0].Start)).String(), wait,
			round(a.Duration).String(), what(a), key)
	}
	fmt.Fprintln(out)
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
// an outage of a minute. It is also the longest the budget's line holds a
// request's retries, with the attempts' time (none in fake time).
var outageBackoff = retryhttp.FullJitter{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}

// A call is one request of the outage scene.
type call struct {
	sent, ended time.Duration   // since the scene began
	ok          bool            // served: 200
	attempts    []time.Duration // when each of its attempts reached the server
}

// lagNoted is how late the load may fall behind its schedule before the
// table says so: a tenth of the outage.
const lagNoted = outageDown / 10

// callHeader carries a call's number, for the server to note its attempts.
const callHeader = "X-Call"

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
	n := int((outageBefore + outageDown + outageAfter) * outageRate / time.Second)
	calls := make([][]call, len(sides))
	for i := range calls {
		calls[i] = make([]call, n)
	}
	var mu sync.Mutex
	var start time.Time // set before the first request
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since := time.Since(start)
		id, _ := strconv.Atoi(r.Header.Get(callHeader))
		mu.Lock()
		for i, s := range sides {
			if r.URL.Path == s.path && id >= 0 && id < n {
				calls[i][id].attempts = append(calls[i][id].attempts, since)
			}
		}
		mu.Unlock()
		if down(since) {
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
	lags := make([]time.Duration, len(sides))
	for i, s := range sides {
		wg.Go(func() {
			tr := &retryhttp.Transport{Budget: s.budget, Policy: retryhttp.Policy{Backoff: outageBackoff}}
			if net != nil {
				tr.Base = &http.Transport{DialContext: net.DialContext, MaxIdleConnsPerHost: 100}
			}
			client := &http.Client{Transport: tr}
			defer client.CloseIdleConnections()
			lags[i] = steady(client, srv.URL+s.path, start, calls[i])
		})
	}
	wg.Wait()
	srv.Close() // and waits for the handlers: every attempt is noted

	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	b := outageBackoff.Base
	for _, l := range []string{
		fmt.Sprintf("Outage: %d GETs a second for %v through each of two Transports, to an endpoint that",
			outageRate, secs(outageBefore+outageDown+outageAfter)),
		fmt.Sprintf("answers 503 from %v to %v, longer than a request's 3 backoffs (here under %d, %d and %d ms).",
			secs(outageBefore), secs(outageBefore+outageDown), ms(b), ms(2*b), ms(4*b)),
		"One Transport has no budget: it retries every failure (UnlimitedBudget). The other has the",
		"default retry budget, which keeps retries from piling onto a host (URL host and port) that fails:",
		" - A request alone (no other to its host in flight), as each scene above, gets its retries,",
		fmt.Sprintf("   paid from the host's credit: %d retries, refilled in 10 s; a retry that succeeds gives its",
			10), // the default Budget's sizes (NewBudget's doc)
		fmt.Sprintf("   one back, any other success earns %.2g of one; a wait a server asked for costs nothing.",
			0.55),
		" - Once another request has failed the host, a retry waits in the host's line instead of going",
		"   after its backoff; each success of the host lets go the retries the credit pays for. With no",
		fmt.Sprintf("   news of the host, the oldest goes as a probe after a silence of its longest backoff (here %d,",
			ms(b)),
		fmt.Sprintf("   %d or %d ms; none goes here: a failure every %d ms is news).",
			ms(2*b), ms(4*b), ms(time.Second/outageRate)),
		" - A retry waits in line only while its request's schedule lasts: the longest the backoffs of",
		fmt.Sprintf("   its retries left could be (here %d + %d + %d = %d ms from its first failure), plus its",
			ms(b), ms(2*b), ms(4*b), ms(b+2*b+4*b)),
		"   attempts' time, or the wait a server asked for in Retry-After; and never past its deadline.",
		"   Then it goes if the host's last answer was a success; if not, the request ends, and its",
		"   caller gets its last failure (here a 503).",
		"",
	} {
		fmt.Fprintln(out, l)
	}
	rows := []struct {
		label string
		value func([]call) string
	}{
		{"", nil},
		{"requests sent during the outage", func(c []call) string { return strconv.Itoa(len(during(c))) }},
		{"  attempts the endpoint got during it, per request", func(c []call) string {
			return perCall(during(c), func(at time.Duration) bool { return down(at) })
		}},
		{"  attempts it got after the outage, per request", func(c []call) string {
			return perCall(during(c), func(at time.Duration) bool { return at >= outageBefore+outageDown })
		}},
		{"  served in the end", func(c []call) string { return strconv.Itoa(served(during(c))) }},
		{"  longest a request waited for its answer", func(c []call) string {
			var longest time.Duration
			for _, c := range during(c) {
				longest = max(longest, c.ended-c.sent)
			}
			return fmt.Sprintf("%.2fs", longest.Seconds())
		}},
		{"requests sent after the outage, served", func(c []call) string {
			var after []call
			for _, c := range c {
				if c.sent >= outageBefore+outageDown {
					after = append(after, c)
				}
			}
			return fmt.Sprintf("%d/%d", served(after), len(after))
		}},
	}
	for _, r := range rows {
		line := fmt.Sprintf("%-50s", r.label)
		for i, s := range sides {
			if r.value == nil {
				line += fmt.Sprintf("  %14s", s.name)
			} else {
				line += fmt.Sprintf("  %14s", r.value(calls[i]))
			}
		}
		fmt.Fprintln(out, line)
	}
	if lag := max(lags[0], lags[1]); lag > lagNoted {
		fmt.Fprintf(out, "(the machine held the load up for %v at once, which may skew these figures)\n",
			lag.Round(time.Millisecond))
	}
	fmt.Fprintln(out)
	for _, l := range []string{
		"So the budget kept the failing endpoint to about one attempt per request, and it did not hold",
		"the callers: each request ended within its schedule, no later than it could have without a",
		"budget, so callers do not pile up on a dead host. Either way, few requests sent during the",
		fmt.Sprintf("outage were served: those sent in its last %d ms or so, whose schedules outlasted it (with",
			ms(b+2*b+4*b)),
		"the budget, those still in line at the endpoint's first success, which let them go).",
	} {
		fmt.Fprintln(out, l)
	}
}

// steady sends outageRate GETs a second to url through client, the i-th
// at start plus i gaps, as calls[i], notes how each went, and returns the
// latest a call was sent: how long a busy machine held the load up.
func steady(client *http.Client, url string, start time.Time, calls []call) (lag time.Duration) {
	var wg sync.WaitGroup
	for i := range calls {
		at := time.Duration(i) * time.Second / outageRate
		time.Sleep(time.Until(start.Add(at)))
		sent := time.Since(start)
		lag = max(lag, sent-at)
		wg.Go(func() {
			c := &calls[i]
			c.sent = sent
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set(callHeader, strconv.Itoa(i))
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				c.ok = resp.StatusCode == http.StatusOK
			}
			c.ended = time.Since(start)
		})
	}
	wg.Wait()
	return lag
}

// down reports whether the endpoint is down at a time since the scene
// began.
func down(at time.Duration) bool { return at >= outageBefore && at < outageBefore+outageDown }

// during returns the calls sent during the outage.
func during(calls []call) []call {
	var d []call
	for _, c := range calls {
		if down(c.sent) {
			d = append(d, c)
		}
	}
	return d
}

// perCall returns the attempts of calls that reached the server at a time
// in, per call.
func perCall(calls []call, in func(time.Duration) bool) string {
	n := 0
	for _, c := range calls {
		for _, at := range c.attempts {
			if in(at) {
				n++
			}
		}
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(max(len(calls), 1)))
}

// served returns how many of calls were served.
func served(calls []call) int {
	n := 0
	for _, c := range calls {
		if c.ok {
			n++
		}
	}
	return n
}

// secs formats d in seconds.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

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

func what(a retryhttp.Attempt) string {
	if a.Err != nil {
		s := a.Err.Error()
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
		return s
	}
	return strconv.Itoa(a.Response.StatusCode)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
