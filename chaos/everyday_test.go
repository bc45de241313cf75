package chaos

// TestEverydayRealFaults: four of the everyday faults on real loopback, in
// real time, through the bare transport, retryhttp's default Transport, the
// same with UnlimitedBudget(), and the peers as bench/ configures them
// (everyday_clients_test.go). The core module measures the same faults in
// fake time (everyday_faults_test.go) and faults 2 and 3 here on loopback
// for retryhttp alone (everyday_faults_loopback_test.go, through
// internal/testutil's runners, which they share); this puts the peers
// beside it, under real faults.
//
//  1. Resets: toxiproxy's reset_peer on 20 % of the attempts, under 100
//     GETs a second. Each attempt goes through a clean proxy or the faulty
//     one by a draw fixed by the call and the attempt's number (the router
//     of clients_test.go), so every client meets the fault on the same
//     attempts. The clients run at the same time, each against a server
//     and proxies of its own.
//  2. A backend restarted behind httputil.ReverseProxy, down 300 ms, under
//     a GET every 2 ms and a POST every 5 ms for 1.5 s. The POSTs carry no
//     key: retryhttp adds one (Policy.IdempotencyKeys), the peers send them
//     as they are. One client after another.
//  3. An HTTP/2 server over TLS answering in 50 ms resets all its
//     connections 5 times, 60 ms apart, under 200 GETs sent at once. One
//     client after another.
//  4. 429 bursts: 50 GETs at once every 5 s to a server admitting 20 a
//     second, which answers 429 with Retry-After: 1 beyond. The clients
//     run at the same time, each against a server of its own.
//
// Every call has a 10 s deadline. What is asserted: no retryhttp client
// applies a POST twice, and every POST it sends carries a key; each fault
// fails some of the bare client's calls (it bit); and, when the scheduler
// kept up (its worst lag under everydayLagLimit during the fault, or during
// the default Transport's run where the clients run one after another),
// retryhttp's default Transport serves at least what UnlimitedBudget()
// serves less everydayMargin, and meets its target (the constants below).
// The peers are measured and reported only. With -update the tables go into
// README.md ("Everyday faults against the peers").

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

var everydayFull = flag.Bool("everyday.full", false,
	"TestEverydayRealFaults at full size: 10 s of resets (1,000 GETs) and 3 bursts of 429s")

// everydaySize is how long faults 1 and 4 run; faults 2 and 3 have a
// fixed schedule.
type everydaySize struct {
	resetsFor time.Duration // fault 1's load, at 100 GETs a second
	bursts    int           // fault 4's bursts, 5 s apart
}

func everydaySizeOf() everydaySize {
	switch {
	case *everydayFull:
		return everydaySize{resetsFor: 10 * time.Second, bursts: 3}
	case testing.Short():
		return everydaySize{resetsFor: time.Second, bursts: 2}
	}
	return everydaySize{resetsFor: 3 * time.Second, bursts: 2}
}

const (
	// everydayLagLimit is the scheduler lag (testutil.LagProbe) over which a
	// fault's serving figures are not judged: on a machine that busy they
	// are the machine's as much as the clients'.
	everydayLagLimit = 100 * time.Millisecond

	// everydayMargin is how far (a share of the calls) the default
	// Transport's serving may fall below UnlimitedBudget()'s.
	everydayMargin = 0.02

	// everydayBareMax is the bare client's highest share served: above
	// it, the fault did not bite.
	everydayBareMax = 0.9

	// everydaySeed fixes fault 1's draws.
	everydaySeed = seed + 0x21
)

// The targets for the default Transport.
const (
	resetsTarget     = 0.99 // fault 1: served
	restartTarget    = 0.98 // fault 2: GETs served, and POSTs
	h2CloseTarget    = 196  // fault 3: GETs served of 200
	burstsTarget     = 0.99 // fault 4: served
	burstsMaxPerCall = 2.0  // fault 4: attempts per call
)

// everydayFigures is what one fault measured through one client.
type everydayFigures struct {
	client             everydayClient
	gets, getsServed   int
	posts, postsServed int
	attempts           int // that reached the transport beneath the client
	twice              int // calls whose POST the backend applied more than once
	unkeyed            int // POSTs that reached the backend without a key
	conns              int // fault 3: connections the server accepted, the warm one included
	lag                time.Duration
	why                map[string]int // why the calls not served failed
}

func (f *everydayFigures) add(o everydayOutcome) {
	f.attempts += o.attempts
	switch {
	case o.post && o.served:
		f.posts++
		f.postsServed++
	case o.post:
		f.posts++
	case o.served:
		f.gets++
		f.getsServed++
	default:
		f.gets++
	}
	if !o.served {
		if f.why == nil {
			f.why = make(map[string]int)
		}
		f.why[o.why]++
	}
}

func (f *everydayFigures) calls() int         { return f.gets + f.posts }
func (f *everydayFigures) served() int        { return f.getsServed + f.postsServed }
func (f *everydayFigures) share() float64     { return float64(f.served()) / float64(f.calls()) }
func (f *everydayFigures) getShare() float64  { return float64(f.getsServed) / float64(f.gets) }
func (f *everydayFigures) postShare() float64 { return float64(f.postsServed) / float64(f.posts) }
func (f *everydayFigures) perCall() float64   { return float64(f.attempts) / float64(f.calls()) }

// failures returns why calls were not served, most frequent first.
func (f *everydayFigures) failures() string {
	var parts []string
	for _, k := range testutil.MostFirst(f.why) {
		parts = append(parts, fmt.Sprintf("%d× %s", f.why[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// everydayFault is one fault of TestEverydayRealFaults.
type everydayFault struct {
	id  string // the subtest's name
	run func(t *testing.T, size everydaySize) []everydayFigures
	// table renders the figures as a Markdown table, with the line that
	// names the fault above it.
	table func(size everydaySize, figs []everydayFigures) string
	// target asserts the fault's target for the default Transport.
	target func(t *testing.T, def *everydayFigures)
	// judged reports whether the serving figures may be judged (when the
	// scheduler kept up), with the reason if not.
	judged func(figs []everydayFigures) (bool, string)
}

// TestEverydayRealFaults runs the four faults (see the top of the file)
// through every client, logs their tables, and asserts what each fault
// must show. With -update it writes the tables into README.md, from a run
// that passed with every fault judged, without -race.
func TestEverydayRealFaults(t *testing.T) {
	size := everydaySizeOf()
	start := time.Now()
	var sections []string
	unjudged := 0
	for _, f := range everydayFaults {
		t.Run(f.id, func(t *testing.T) {
			figs := f.run(t, size)
			require.Len(t, figs, len(everydayClients))
			tab := f.table(size, figs)
			sections = append(sections, tab)
			if testing.Verbose() {
				var why []string
				for _, g := range figs {
					why = append(why, fmt.Sprintf("%s: %s", g.client.name, g.failures()))
				}
				t.Logf("race %v\n%s\nnot served:\n%s", testutil.RaceEnabled, tab, strings.Join(why, "\n"))
			}
			if !everydayCheck(t, f, figs) {
				unjudged++
			}
		})
	}
	t.Logf("%v in all; serving not judged in %d of %d faults", time.Since(start).Round(time.Millisecond), unjudged, len(everydayFaults))
	switch {
	case !*update:
	case t.Failed() || unjudged > 0 || testutil.RaceEnabled || len(sections) != len(everydayFaults):
		t.Errorf("README.md not updated: the tables must come from a run of every fault, without -race, " +
			"that passed with every fault judged")
	default:
		if err := writeBetween("README.md", everydayBegin, everydayEnd, strings.Join(sections, "\n")); err != nil {
			t.Fatal(err)
		}
	}
}

// Markers of the tables of TestEverydayRealFaults in README.md
// (bench/cmd/report reads what lies between them into BENCHMARKS.md).
const (
	everydayBegin = "<!-- TestEverydayRealFaults tables: begin -->\n"
	everydayEnd   = "<!-- TestEverydayRealFaults tables: end -->\n"
)

// everydayCheck asserts what every fault must show, then what depends on
// the scheduler keeping up if it did, and reports whether it did.
func everydayCheck(t *testing.T, f everydayFault, figs []everydayFigures) bool {
	t.Helper()
	var bare, def, unl *everydayFigures
	for i := range figs {
		g := &figs[i]
		switch {
		case g.client.role == baseline:
			bare = g
		case g.client.role == subject && g.client.unlimited:
			unl = g
		case g.client.role == subject:
			def = g
		}
		if g.client.role == subject {
			assert.Zero(t, g.twice, "%s: no POST applied twice", g.client.name)
			assert.Zero(t, g.unkeyed, "%s: every POST carries a key", g.client.name)
		}
	}
	require.NotNil(t, bare)
	require.NotNil(t, def)
	require.NotNil(t, unl)
	assert.LessOrEqual(t, bare.share(), everydayBareMax, "the bare client: the fault bit")
	if ok, why := f.judged(figs); !ok {
		t.Logf("serving not judged: %s", why)
		return false
	}
	assert.GreaterOrEqual(t, def.share(), unl.share()-everydayMargin, "the default Transport serves what UnlimitedBudget() does")
	if def.posts > 0 {
		assert.GreaterOrEqual(t, def.getShare(), unl.getShare()-everydayMargin, "GETs: the default Transport serves what UnlimitedBudget() does")
		assert.GreaterOrEqual(t, def.postShare(), unl.postShare()-everydayMargin, "POSTs: the default Transport serves what UnlimitedBudget() does")
	}
	f.target(t, def)
	return true
}

// lagJudged judges a fault whose clients ran at the same time: one lag.
func lagJudged(figs []everydayFigures) (bool, string) {
	if lag := figs[0].lag; lag > everydayLagLimit {
		return false, fmt.Sprintf("the scheduler lagged %v (over %v)", lag.Round(time.Millisecond), everydayLagLimit)
	}
	return true, ""
}

// defaultJudged judges a fault whose clients ran one after another by the
// lag during the default Transport's run: the checks hold its figures to a
// floor, which a stalled machine could push them under. A lag during
// another client's run changes that client's figures, which are not held
// to anything (UnlimitedBudget()'s is a ceiling for the default's less
// everydayMargin, and a stall lowers it as often as it raises it). Retries
// can cause lag themselves: without a budget, 200 GETs failing at once over
// HTTP/2 retry at once, and net/http dials a TLS connection for each one
// that finds none (fault 3's "connections").
func defaultJudged(figs []everydayFigures) (bool, string) {
	for _, g := range figs {
		if g.client.role == subject && !g.client.unlimited && g.lag > everydayLagLimit {
			return false, fmt.Sprintf("the scheduler lagged %v (over %v) during %s's run",
				g.lag.Round(time.Millisecond), everydayLagLimit, g.client.name)
		}
	}
	return true, ""
}

var everydayFaults = []everydayFault{
	{
		id:  "resets",
		run: everydayResets,
		table: func(size everydaySize, figs []everydayFigures) string {
			return mdTable(fmt.Sprintf("**1. Resets**: toxiproxy `reset_peer` on 20 %% of the attempts, 100 GETs a second for "+
				"%.0f s (%d calls); scheduler lag up to %v", size.resetsFor.Seconds(), figs[0].calls(), ms(figs[0].lag)),
				[]string{"client", "served", "attempts per call"}, figs,
				func(g *everydayFigures) []string { return []string{pct(g.share()), perCall(g)} })
		},
		target: func(t *testing.T, def *everydayFigures) {
			assert.GreaterOrEqual(t, def.share(), resetsTarget, "the target: served")
		},
		judged: lagJudged,
	},
	{
		id:  "restart",
		run: inTurn(restartOnce),
		table: func(_ everydaySize, figs []everydayFigures) string {
			return mdTable(fmt.Sprintf("**2. A backend restarted behind `httputil.ReverseProxy`**, down 300 ms: a GET every "+
				"2 ms (%d) and a POST every 5 ms (%d) for 1.5 s", figs[0].gets, figs[0].posts),
				[]string{"client", "GETs served", "POSTs served", "POSTs applied twice", "attempts per call", "scheduler lag"}, figs,
				func(g *everydayFigures) []string {
					return []string{pct(g.getShare()), pct(g.postShare()), strconv.Itoa(g.twice), perCall(g), ms(g.lag)}
				})
		},
		target: func(t *testing.T, def *everydayFigures) {
			assert.GreaterOrEqual(t, def.getShare(), restartTarget, "the target: GETs served")
			assert.GreaterOrEqual(t, def.postShare(), restartTarget, "the target: POSTs served")
		},
		judged: defaultJudged,
	},
	{
		id:  "h2closes",
		run: inTurn(h2ClosesOnce),
		table: func(_ everydaySize, figs []everydayFigures) string {
			return mdTable("**3. An HTTP/2 server resetting all its connections 5 times, 60 ms apart**, under 200 GETs "+
				"sent at once that it answers in 50 ms",
				[]string{"client", "served of 200", "attempts per call", "connections", "scheduler lag"}, figs,
				func(g *everydayFigures) []string {
					return []string{strconv.Itoa(g.served()), perCall(g), strconv.Itoa(g.conns), ms(g.lag)}
				})
		},
		target: func(t *testing.T, def *everydayFigures) {
			assert.GreaterOrEqual(t, def.served(), h2CloseTarget, "the target: served of 200")
		},
		judged: defaultJudged,
	},
	{
		id:  "bursts",
		run: everydayBursts,
		table: func(size everydaySize, figs []everydayFigures) string {
			return mdTable(fmt.Sprintf("**4. 429 bursts**: 50 GETs at once every 5 s (%d bursts) to a server admitting 20 a "+
				"second, 429 with `Retry-After: 1` beyond; scheduler lag up to %v", size.bursts, ms(figs[0].lag)),
				[]string{"client", "served", "attempts per call"}, figs,
				func(g *everydayFigures) []string { return []string{pct(g.share()), perCall(g)} })
		},
		target: func(t *testing.T, def *everydayFigures) {
			assert.GreaterOrEqual(t, def.share(), burstsTarget, "the target: served")
			assert.LessOrEqual(t, def.perCall(), burstsMaxPerCall, "the target: attempts per call")
		},
		judged: lagJudged,
	},
}

func pct(v float64) string              { return fmt.Sprintf("%.1f %%", 100*v) }
func perCall(g *everydayFigures) string { return fmt.Sprintf("%.2f", g.perCall()) }

// mdTable renders a Markdown table of one row per client under a line
// naming the fault.
func mdTable(title string, cols []string, figs []everydayFigures, cells func(*everydayFigures) []string) string {
	var b strings.Builder
	b.WriteString(wrapLine(title, 96) + "\n\n| " + strings.Join(cols, " | ") + " |\n|---|")
	for range cols[1:] {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for i := range figs {
		b.WriteString("| " + figs[i].client.name + " | " + strings.Join(cells(&figs[i]), " | ") + " |\n")
	}
	return b.String()
}

// wrapLine breaks s at spaces into lines of at most width characters
// (a longer word stays whole).
func wrapLine(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+utf8.RuneCountInString(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += utf8.RuneCountInString(w)
	}
	return b.String()
}

// ---- fault 1: resets ----

// everydayResets sends 100 GETs a second for size.resetsFor through every
// client at once, each against a server and proxies of its own; 20 % of
// the attempts, by the router's draws, go through the proxy whose
// reset_peer toxic resets the connection as soon as the request's first
// bytes reach it.
func everydayResets(t *testing.T, size everydaySize) []everydayFigures {
	const perSecond, rate = 100, 0.2
	type rig struct {
		srv  *httptest.Server
		px   *proxies
		base *http.Transport
		rt   http.RoundTripper
		url  string
	}
	rigs := make([]rig, len(everydayClients))
	closeAll := func() {
		for _, r := range rigs {
			if r.srv == nil {
				continue
			}
			r.base.CloseIdleConnections()
			if r.px != nil {
				r.px.stop()
			}
			r.srv.Close()
		}
	}
	for i, c := range everydayClients {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "ok")
		}))
		srv.Config.ErrorLog = testutil.DiscardLog()
		srv.Start()
		rigs[i].srv, rigs[i].base = srv, cleanhttp.DefaultPooledTransport()
		px, err := startProxies(srv.Listener.Addr().String(),
			[]toxic{{"reset_peer", "upstream", map[string]any{"timeout": 0}}})
		if err != nil {
			closeAll()
			t.Fatal(err)
		}
		rigs[i].px = px
		rt := &router{next: rigs[i].base, clean: px.clean.Listen, faulty: px.faulty.Listen, rate: rate, seed: everydaySeed}
		rigs[i].rt = c.new(rt, false)
		rigs[i].url = "http://" + px.clean.Listen + "/things/"
	}

	n := int(size.resetsFor * perSecond / time.Second)
	outs := make([][]everydayOutcome, len(everydayClients))
	for i := range outs {
		outs[i] = make([]everydayOutcome, n)
	}
	probe := testutil.StartLagProbe()
	var wg sync.WaitGroup
	testutil.Every(&wg, time.Now(), time.Second/perSecond, size.resetsFor, func(id int) {
		for i := range everydayClients {
			wg.Go(func() {
				outs[i][id] = everydaySend(rigs[i].rt, id, testutil.NewCall(id, http.MethodGet, rigs[i].url+strconv.Itoa(id), ""))
			})
		}
	})
	wg.Wait()
	lag := probe.Stop()
	closeAll()
	return figuresOf(outs, lag)
}

// figuresOf sums each client's outcomes (outs[i] is everydayClients[i]'s)
// of a fault whose scheduler lag was lag.
func figuresOf(outs [][]everydayOutcome, lag time.Duration) []everydayFigures {
	figs := make([]everydayFigures, len(everydayClients))
	for i, c := range everydayClients {
		figs[i] = everydayFigures{client: c, lag: lag}
		for _, o := range outs[i] {
			figs[i].add(o)
		}
	}
	return figs
}

// ---- fault 2: a backend restarted behind a reverse proxy ----

// inTurn returns a fault's run that runs once through each client in
// turn, one after another (faults 2 and 3).
func inTurn(once func(*testing.T, everydayClient) everydayFigures) func(*testing.T, everydaySize) []everydayFigures {
	return func(t *testing.T, _ everydaySize) []everydayFigures {
		figs := make([]everydayFigures, len(everydayClients))
		for i, c := range everydayClients {
			figs[i] = once(t, c)
		}
		return figs
	}
}

// restartOnce runs fault 2 through client c (testutil.RunProxyRestart):
// a ledger backend behind httputil.ReverseProxy, a GET every 2 ms and a
// POST every 5 ms for 1.5 s, the backend closed at 600 ms under a POST
// being applied and listening again 300 ms later.
func restartOnce(t *testing.T, c everydayClient) everydayFigures {
	var mu sync.Mutex
	var outs []everydayOutcome
	run := testutil.RunProxyRestart(t, func(base *http.Transport) testutil.Send {
		rt := c.new(counting{base}, true)
		return func(id int, req *http.Request) {
			o := everydaySend(rt, id, req)
			mu.Lock()
			outs = append(outs, o)
			mu.Unlock()
		}
	})
	f := everydayFigures{client: c, lag: run.Lag, twice: run.Ledger.Twice, unkeyed: run.Ledger.Unkeyed}
	for _, o := range outs {
		f.add(o)
	}
	require.Equal(t, run.GETs, f.gets)
	return f
}

// ---- fault 3: an HTTP/2 server resetting its connections ----

// h2ClosesOnce runs fault 3 through client c (testutil.RunH2Closes): 200
// GETs at once, on a warm HTTP/2 connection, to net/http's HTTP/2 server
// over TLS answering in 50 ms, which resets every connection it has at 25,
// 85, 145, 205 and 265 ms: the first close comes while every GET of the
// burst waits for its answer.
func h2ClosesOnce(t *testing.T, c everydayClient) everydayFigures {
	outs := make([]everydayOutcome, testutil.H2ClosesGETs)
	run := testutil.RunH2Closes(t, func(base *http.Transport) testutil.Send {
		rt := c.new(counting{base}, false)
		return func(id int, req *http.Request) { outs[id] = everydaySend(rt, id, req) }
	})
	f := everydayFigures{client: c, lag: run.Lag, conns: run.Conns}
	for _, o := range outs {
		f.add(o)
	}
	return f
}

// ---- fault 4: 429 bursts ----

// everydayBursts sends size.bursts bursts of 50 GETs at once, 5 s apart,
// through every client at the same time, each to a server of its own that
// admits 20 a second and answers the others 429 with Retry-After: 1, each
// answer in 10 ms.
func everydayBursts(t *testing.T, size everydaySize) []everydayFigures {
	const burst, every = 50, 5 * time.Second
	srvs := make([]*httptest.Server, len(everydayClients))
	bases := make([]*http.Transport, len(everydayClients))
	rts := make([]http.RoundTripper, len(everydayClients))
	for i, c := range everydayClients {
		srvs[i] = httptest.NewUnstartedServer(newRateLimited(20, 10*time.Millisecond))
		srvs[i].Config.ErrorLog = testutil.DiscardLog()
		srvs[i].Start()
		bases[i] = cleanhttp.DefaultPooledTransport()
		rts[i] = c.new(counting{bases[i]}, false)
	}
	outs := make([][]everydayOutcome, len(everydayClients))
	for i := range outs {
		outs[i] = make([]everydayOutcome, size.bursts*burst)
	}
	probe := testutil.StartLagProbe()
	var wg sync.WaitGroup
	testutil.Every(&wg, time.Now(), every, time.Duration(size.bursts)*every, func(b int) {
		for j := range burst {
			id := b*burst + j
			for i := range everydayClients {
				wg.Go(func() {
					outs[i][id] = everydaySend(rts[i], id, testutil.NewCall(id, http.MethodGet, srvs[i].URL+"/things/"+strconv.Itoa(id), ""))
				})
			}
		}
	})
	wg.Wait()
	lag := probe.Stop()
	for i := range srvs {
		bases[i].CloseIdleConnections()
		srvs[i].Close()
	}
	return figuresOf(outs, lag)
}
