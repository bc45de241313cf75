package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

const defaultMaxAttempts = 4 // a zero retryhttp.Policy's MaxAttempts

var update = flag.Bool("update", false, "write the table TestChaos prints into README.md")

// TestChaos sends the same calls through every client under every fault
// and checks, for the bare client and retryhttp: no POST applied twice, no
// truncated or altered body accepted (request or response), no key reused
// with another body, no call finished more than maxOverrun past its
// deadline; and retryhttp's success rate at least the bare client's, less
// successMargin, with at most half the bare client's failures where a retry
// can help. A fault meant to break connections must fail some of the bare
// client's calls. go-retryablehttp is measured, not checked.
//
// With -v it prints the table; -update writes it into README.md.
func TestChaos(t *testing.T) {
	start := time.Now()
	var rows []row
	stalled := 0 // runs whose timing was not judged
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			for _, p := range f.protos {
				t.Run(p.name(), func(t *testing.T) {
					rs, lag := runFault(t, seed+uint64(i), f, p)
					rows = append(rows, row{f.name, p, rs, lag})
					if lag > lagLimit {
						stalled++
					}
					check(t, seed+uint64(i), f, rs, lag)
				})
			}
		})
	}
	tab := table(rows)
	t.Logf("%d calls per fault and client, %d at a time, deadline %v, %v in all; timing not judged in %d of %d runs\n%s",
		calls, workers, callDeadline, time.Since(start).Round(time.Millisecond), stalled, len(rows), tab)
	switch {
	case !*update:
	case t.Failed() || stalled > 0:
		t.Errorf("README.md not updated: the table must come from a run that passed with every run judged")
	default:
		if err := writeTable("README.md", tab); err != nil {
			t.Fatal(err)
		}
	}
}

// check asserts what the fault's results must show. What depends on time
// (success rates, lateness) is judged only when the scheduler's worst lag
// stayed under lagLimit; a call may then end maxOverrun past its deadline,
// plus twice that lag.
func check(t *testing.T, seed uint64, f fault, rs []result, lag time.Duration) {
	t.Helper()
	for _, r := range rs {
		if r.role == peer {
			continue
		}
		if r.twice != 0 {
			t.Errorf("%s: %d POSTs applied twice", r.client, r.twice)
		}
		if r.badRequests != 0 || r.badResponses != 0 {
			t.Errorf("%s: %d altered request bodies applied, %d altered response bodies accepted",
				r.client, r.badRequests, r.badResponses)
		}
		if r.misused != 0 {
			t.Errorf("%s: %d keys resent with another body", r.client, r.misused)
		}
	}
	var bare result
	for _, r := range rs {
		if r.role == baseline {
			bare = r
		}
	}
	if f.breaks && bare.success() > bareMaxSuccess {
		t.Errorf("%s succeeded %.1f%% of calls: the fault did not bite", bare.client, 100*bare.success())
	}
	if lag > lagLimit {
		t.Skipf("timing not judged: the scheduler lagged %v, over %v", lag.Round(time.Millisecond), lagLimit)
	}
	for _, r := range rs {
		if r.role == peer {
			continue
		}
		if r.overrun > maxOverrun+2*lag {
			t.Errorf("%s: a call finished %v past its deadline, more than %v and twice the scheduler's lag of %v",
				r.client, r.overrun, maxOverrun, lag)
		}
		if r.role != subject {
			continue
		}
		if r.success() < bare.success()-successMargin {
			t.Errorf("%s succeeded %.1f%% of calls, %s %.1f%%: more than %.0f points below",
				r.client, 100*r.success(), bare.client, 100*bare.success(), 100*successMargin)
		}
		if f.cutsAnswers && strings.Contains(r.client, "whole responses") {
			// A call whose every attempt meets the fault cannot succeed:
			// judge the calls that had a clean attempt among their first
			// defaultMaxAttempts.
			savable := 0
			for id := range calls {
				for n := 1; n <= defaultMaxAttempts; n++ {
					if draw(seed, id, n) >= f.rate {
						savable++
						break
					}
				}
			}
			if float64(r.ok) < wholeTarget*float64(savable) {
				t.Errorf("%s served %d of the %d calls with a clean attempt (%.1f%% of all calls): under %.0f%%",
					r.client, r.ok, savable, 100*r.success(), 100*wholeTarget)
			}
			t.Logf("%s served %d of %d calls whose answers were cut, %d of them with a clean attempt among their first %d",
				r.client, r.ok, calls, savable, defaultMaxAttempts)
		}
		if f.recoverable && 2*(calls-r.ok) > calls-bare.ok {
			t.Errorf("%s failed %d calls, %s %d: retries saved fewer than half",
				r.client, calls-r.ok, bare.client, calls-bare.ok)
		}
	}
}

// A result sums one client's calls under one fault.
type result struct {
	client       string
	role         role
	ok           int            // calls that got the whole, right response
	attempts     int            // attempts the router saw
	twice        int            // calls whose POST the server applied more than once
	badRequests  int            // request bodies applied that differ from what their sender hashed
	badResponses int            // response bodies read to the end that differ from what the server sent
	misused      int            // keys the server saw again with another body
	overrun      time.Duration  // the latest a call finished past its deadline
	errs         map[string]int // why calls failed, for -v
}

func (r result) success() float64 { return float64(r.ok) / calls }

// An outcome is how one call ended.
type outcome struct {
	ok       bool
	answered bool   // a response arrived (its body may still have failed)
	altered  bool   // the body read to its end is not the one the server sent
	why      string // why it failed
	attempts int
	overrun  time.Duration
}

// A rig is what one client meets under one fault: a server with its
// ledger, the two proxies in front of it and the routing base transport the
// client is built on.
type rig struct {
	ledger *ledger
	srv    *httptest.Server
	px     *proxies
	base   *http.Transport
	router *router
	url    string // the clean proxy's; the router picks the proxy per attempt
}

func newRig(seed uint64, f fault, p proto) (*rig, error) {
	r := &rig{ledger: newLedger(f.kill, seed)}
	r.srv = startServer(p, r.ledger)
	px, err := startProxies(r.srv.Listener.Addr().String(), f.toxics)
	if err != nil {
		r.srv.Close()
		return nil, err
	}
	r.px = px
	r.base = newBase(p, r.srv)
	r.router = &router{next: r.base, clean: px.clean.Listen, faulty: px.faulty.Listen, rate: f.rate, seed: seed}
	r.url = "http://" + px.clean.Listen + "/pay"
	if p == h2 {
		r.url = "https://" + px.clean.Listen + "/pay"
	}
	return r, nil
}

// close ends every connection, then the server, and waits for the
// server's handlers: the ledger is final when it returns.
func (r *rig) close() {
	r.base.CloseIdleConnections()
	r.px.stop()
	r.srv.Close()
	r.ledger.handlers.Wait()
}

// runFault runs every call through every client under fault f over
// protocol p and sums up each client's calls. Each client has a rig of its
// own, and the clients send each call at the same moment, so that whatever
// slows the machine slows them alike. It also returns the scheduler's worst
// lag meanwhile.
func runFault(t *testing.T, seed uint64, f fault, p proto) ([]result, time.Duration) {
	t.Helper()
	rigs := make([]*rig, len(clients))
	hcs := make([]*http.Client, len(clients))
	for i, c := range clients {
		rg, err := newRig(seed, f, p)
		if err != nil {
			for _, rg := range rigs[:i] {
				rg.close()
			}
			t.Fatal(err)
		}
		rigs[i], hcs[i] = rg, c.new(rg.router, f)
	}

	probe := testutil.StartLagProbe()
	outs := make([][]outcome, len(clients)) // client, call
	for i := range outs {
		outs[i] = make([]outcome, calls)
	}
	var next atomic.Int64
	var workersDone sync.WaitGroup
	for range workers {
		workersDone.Go(func() {
			for id := int(next.Add(1) - 1); id < calls; id = int(next.Add(1) - 1) {
				var wg sync.WaitGroup
				for i := range clients {
					wg.Go(func() { outs[i][id] = send(hcs[i], rigs[i].url, id) })
				}
				wg.Wait()
			}
		})
	}
	workersDone.Wait()
	lag := probe.Stop()
	for _, rg := range rigs {
		rg.close()
	}

	rs := make([]result, len(clients))
	for i, c := range clients {
		rs[i] = sum(c, outs[i], rigs[i].ledger)
		if testing.Verbose() {
			t.Logf("%-16s %5.1f%%; failures: %v", c.name, 100*rs[i].success(), rs[i].errs)
		}
	}
	if testing.Verbose() {
		t.Logf("scheduler lag up to %v", lag.Round(100*time.Microsecond))
	}
	return rs, lag
}

// sum sums up client c's outcomes and what its server's ledger saw.
func sum(c client, outs []outcome, l *ledger) result {
	r := result{client: c.name, role: c.role, errs: make(map[string]int)}
	for _, o := range outs {
		r.attempts += o.attempts
		r.overrun = max(r.overrun, o.overrun)
		switch {
		case o.ok:
			r.ok++
		case o.altered:
			r.badResponses++
		default:
			r.errs[o.why]++
		}
	}
	r.badRequests, r.misused, r.twice = l.badBodies, l.misused, l.twice()
	return r
}

// newBase returns the transport under every client: go-cleanhttp's pooled
// transport (what retryhttp and go-retryablehttp use by default), trusting
// the server's certificate and offering HTTP/2 for p == h2.
func newBase(p proto, srv *httptest.Server) *http.Transport {
	t := cleanhttp.DefaultPooledTransport()
	if p == h2 {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		t.TLSClientConfig = &tls.Config{RootCAs: roots, ClientSessionCache: tls.NewLRUClientSessionCache(16)}
		t.ForceAttemptHTTP2 = true
	}
	return t
}

// send makes call id: calls 0 and 1 of every 4 are GETs, 2 a POST with the
// caller's Idempotency-Key, 3 a POST with none (retryhttp adds one, the
// other clients send it as it is).
func send(c *http.Client, url string, id int) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	deadline, _ := ctx.Deadline()
	cl := &call{id: id}
	ctx = withCall(ctx, cl)

	req, err := testutil.MixedCall(ctx, callHeader, url, id, requestBodies[id])
	if err != nil {
		return outcome{why: err.Error()}
	}
	if req.Method == http.MethodPost {
		req.Header.Set(hashHeader, requestHashes[id])
	}

	var o outcome
	resp, err := c.Do(req)
	if err == nil {
		o.answered = true
		var got []byte
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
		case resp.StatusCode != http.StatusOK:
			o.why = resp.Status
		case testutil.SHA256Hex(got) != resp.Header.Get(hashHeader) || testutil.SHA256Hex(got) != responseHashes[id]:
			o.altered = true
		default:
			o.ok = true
		}
	}
	o.overrun = max(time.Since(deadline), 0)
	o.attempts = int(cl.attempts.Load())
	if err != nil {
		o.why = errKind(err)
	}
	return o
}

// errKind names an error's kind for the failure counts: the innermost
// message, without addresses.
func errKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// A row is one fault over one protocol.
type row struct {
	fault   string
	proto   proto
	results []result
	lag     time.Duration // the scheduler's worst lag during the run
}

// table renders the rows as the Markdown table of README.md.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| fault | protocol | client | success | attempts per call | applied twice | truncated accepted | worst overrun | scheduler lag |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, x := range r.results {
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f %% | %.2f | %d | %d | %v | %v |\n",
				r.fault, r.proto, x.client, 100*x.success(), float64(x.attempts)/calls,
				x.twice, x.badRequests+x.badResponses, ms(x.overrun), ms(r.lag))
		}
	}
	return b.String()
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// Markers of the generated table in README.md.
const (
	tableBegin = "<!-- TestChaos table: begin -->\n"
	tableEnd   = "<!-- TestChaos table: end -->\n"
)

// writeTable replaces what lies between the table markers of file.
func writeTable(file, tab string) error {
	return writeBetween(file, tableBegin, tableEnd, tab)
}

// writeBetween replaces what lies between the markers begin and end of
// file with text.
func writeBetween(file, begin, end, text string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no markers %q and %q", file, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	s = s[:i+len(begin)] + text + s[j:]
	return os.WriteFile(file, []byte(s), 0o644)
}
