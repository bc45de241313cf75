package chaos

import "time"

// The size of a run. Every fault and protocol is run once per client with
// the same calls, the same seed and the same fault draws.
const (
	calls   = 120 // calls per fault, protocol and client
	workers = 6   // calls in flight at once (each sent by every client at the same moment)

	// callDeadline is each call's context deadline, from its start to the
	// end of reading its response body.
	callDeadline = 500 * time.Millisecond

	// faultRate is the share of attempts sent through the faulty proxy in
	// the faults that break connections.
	faultRate = 0.3

	// killRate is the share of requests after which the server closes
	// its HTTP/2 connection abruptly, in the h2 close fault.
	killRate = 0.1

	// attemptTimeout is the retrying clients' limit on one attempt in the
	// timeout fault (retryhttp's Policy.AttemptTimeout, go-retryablehttp's
	// HTTPClient.Timeout); no other fault sets one.
	attemptTimeout = 100 * time.Millisecond

	// backoffScale divides both libraries' default waits, so that retries
	// fit in callDeadline: retryhttp's full jitter from 100 ms to 10 s
	// becomes 5 ms to 500 ms, go-retryablehttp's exponential from 1 s to
	// 30 s becomes 50 ms to 1.5 s.
	backoffScale = 20

	// maxOverrun is how far past its deadline a call may finish, beyond
	// twice the scheduler's worst lag during the run: the deadline's timer
	// wakes one goroutine, which may have to wake the caller's.
	maxOverrun = 20 * time.Millisecond

	// lagLimit is the worst scheduler lag (a machine busy with other work)
	// under which a run's timing is judged: half the attempt timeout. Over
	// it, calls fail or end late for want of CPU, whatever the client, and
	// only the checks that do not depend on time are made.
	lagLimit = attemptTimeout / 2

	// successMargin is how far (a share of the calls) retryhttp's success
	// rate may fall below the bare client's on the same fault. The fault
	// draws are the same, so the rates differ only by timing: a slow
	// scheduler can push a call of either past its deadline.
	successMargin = 0.03

	// bareMaxSuccess is the bare client's highest success rate on a fault
	// that breaks connections: a higher one means the fault did not bite.
	bareMaxSuccess = 0.95

	// seed fixes every fault draw.
	seed = 0x5eed_c4a05

	requestBodySize  = 8 << 10  // every POST's body
	responseBodySize = 16 << 10 // every response's body
)

// A proto is how a client speaks to the server.
type proto int

const (
	h1 proto = iota // HTTP/1.1 in the clear
	h2              // HTTP/2 over TLS (httptest's certificate, ALPN)
)

func (p proto) String() string {
	if p == h2 {
		return "HTTP/2"
	}
	return "HTTP/1.1"
}

// name is p's name for a subtest, without a slash.
func (p proto) name() string {
	if p == h2 {
		return "http2"
	}
	return "http1"
}

// A toxic is one toxiproxy toxic, as its JSON API describes it.
type toxic struct {
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream" (client to server) or "downstream"
	Attributes map[string]any `json:"attributes"`
}

// A fault is a way the network between client and server misbehaves.
//
// Each attempt of call i goes to the faulty proxy (the one with the toxics)
// when a draw fixed by the seed, i and the attempt's number falls below
// rate, and to a clean proxy otherwise; so every client meets the fault on
// exactly the same attempts. kill has the server close its connection
// abruptly after a share of the requests, by a draw fixed the same way.
type fault struct {
	name   string
	protos []proto
	toxics []toxic
	rate   float64
	kill   float64

	// attemptTimeout, if set, bounds each attempt of the retrying clients.
	attemptTimeout time.Duration

	// breaks says the fault fails calls of the bare client: it must fail
	// more than 1-bareMaxSuccess of them, or the fault did not bite.
	breaks bool

	// recoverable says a retry can save the calls the fault fails: each
	// retryhttp client must fail at most half as many as the bare one.
	recoverable bool

	// cutsAnswers says the fault cuts answers after their headers: only a
	// client that reads each answer inside its attempt can retry them, and
	// it must serve at least wholeTarget of the calls.
	cutsAnswers bool
}

// wholeTarget is the share of calls a client reading answers inside its
// attempts (Policy.BufferResponse) must serve when answers are cut.
const wholeTarget = 0.99

var both = []proto{h1, h2}

// faults is the table TestChaos runs, in the order of README.md.
//
// Over TLS the first bytes each way are the handshake's, so a toxic that
// acts on the first chunk (reset_peer) breaks HTTP/2 connections during the
// handshake, before any request is sent; over HTTP/1.1 reset_peer
// downstream drops the response of a request the server has applied.
var faults = []fault{
	{
		name:        "reset_peer upstream",
		protos:      both,
		toxics:      []toxic{{"reset_peer", "upstream", map[string]any{"timeout": 0}}},
		rate:        faultRate,
		breaks:      true,
		recoverable: true,
	},
	{
		name:        "reset_peer downstream",
		protos:      both,
		toxics:      []toxic{{"reset_peer", "downstream", map[string]any{"timeout": 0}}},
		rate:        faultRate,
		breaks:      true,
		recoverable: true,
	},
	{
		// The response never arrives: the server applied the request.
		name:           "timeout downstream",
		protos:         both,
		toxics:         []toxic{{"timeout", "downstream", map[string]any{"timeout": 0}}},
		rate:           faultRate,
		attemptTimeout: attemptTimeout,
		breaks:         true,
		recoverable:    true,
	},
	{
		name:   "latency 20±15 ms both ways",
		protos: both,
		toxics: []toxic{
			{"latency", "upstream", map[string]any{"latency": 20, "jitter": 15}},
			{"latency", "downstream", map[string]any{"latency": 20, "jitter": 15}},
		},
		rate: 1,
	},
	{
		name:   "slicer 512±256 B both ways",
		protos: both,
		toxics: []toxic{
			{"slicer", "upstream", map[string]any{"average_size": 512, "size_variation": 256, "delay": 10}},
			{"slicer", "downstream", map[string]any{"average_size": 512, "size_variation": 256, "delay": 10}},
		},
		rate: 1,
	},
	{
		// Cuts every POST's body; GETs pass until a connection has
		// carried 4 KiB (over TLS, the handshake takes about 2 KiB of it).
		name:        "limit_data upstream 4 KiB",
		protos:      both,
		toxics:      []toxic{{"limit_data", "upstream", map[string]any{"bytes": 4096}}},
		rate:        faultRate,
		breaks:      true,
		recoverable: true,
	},
	{
		// Cuts every response in its body, after the headers.
		name:        "limit_data downstream 8 KiB",
		protos:      both,
		toxics:      []toxic{{"limit_data", "downstream", map[string]any{"bytes": 8192}}},
		rate:        faultRate,
		breaks:      true,
		cutsAnswers: true,
	},
	{
		// HTTP/2 carries every call on one connection, at that rate.
		name:   "bandwidth 4 MB per second both ways",
		protos: both,
		toxics: []toxic{
			{"bandwidth", "upstream", map[string]any{"rate": 4096}},
			{"bandwidth", "downstream", map[string]any{"rate": 4096}},
		},
		rate: 1,
	},
	{
		// The server closes the TCP connection under a request it has
		// applied, without GOAWAY; the requests multiplexed on that
		// connection fail with it. When the close breaks one of its
		// writes, net/http's HTTP/2 client fails the connection's other
		// requests with "http2: client connection force closed via
		// ClientConn.Close", which retryhttp retries.
		name:        "h2 connection close",
		protos:      []proto{h2},
		kill:        killRate,
		breaks:      true,
		recoverable: true,
	},
}
