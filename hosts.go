package retryhttp

import (
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The host table (which policy applies to a host) and the state a
// Transport keeps of each host for its per-host mechanisms, the gates.

// hostTable maps request hosts to policies: exact host:port, exact host,
// then the longest "*.suffix".
type hostTable struct {
	exact    map[string]*policy // "host" and "host:port", lower case, no trailing dot
	suffix   map[string]*policy // "example.com" for "*.example.com"
	hasPorts bool
}

// newHostTable compiles each entry of hosts layered over under.
func newHostTable(hosts map[string]Policy, under Policy) hostTable {
	var t hostTable
	// Sorted, so that keys equal once normalized ("API.example.com" and
	// "api.example.com.") resolve the same way every time: the last wins.
	for _, k := range slices.Sorted(maps.Keys(hosts)) {
		p := hosts[k]
		layered := p.over(under)
		c := layered.compileAll()
		c.hostKey, c.single.hostKey = k, k
		k = normalizeHostKey(k)
		if rest, ok := strings.CutPrefix(k, "*."); ok {
			if t.suffix == nil {
				t.suffix = make(map[string]*policy)
			}
			t.suffix[rest] = c
			continue
		}
		if t.exact == nil {
			t.exact = make(map[string]*policy)
		}
		if _, port, err := net.SplitHostPort(k); err == nil && port != "" {
			t.hasPorts = true
		}
		t.exact[k] = c
	}
	return t
}

func normalizeHostKey(k string) string {
	k = lowerASCII(k)
	if h, port, err := net.SplitHostPort(k); err == nil {
		return net.JoinHostPort(strings.TrimRight(h, "."), port)
	}
	k = strings.TrimRight(k, ".")
	if len(k) > 2 && k[0] == '[' && k[len(k)-1] == ']' { // an IPv6 host as URLs write it
		k = k[1 : len(k)-1]
	}
	return k
}

// lowerASCII lower-cases the ASCII letters of s: host names compare
// case-insensitively in ASCII only (RFC 4343); other bytes are kept as they
// are. It allocates only when s has an upper-case letter.
func lowerASCII(s string) string {
	i := 0
	for i < len(s) && !('A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if 'A' <= b[j] && b[j] <= 'Z' {
			b[j] += 'a' - 'A'
		}
	}
	return string(b)
}

// empty reports whether the table has no entry.
func (t *hostTable) empty() bool { return t.exact == nil && t.suffix == nil }

// lookup returns the policy for a URL's host, or nil when none matches.
func (t *hostTable) lookup(scheme, hostname, port string) *policy {
	if t.exact == nil && t.suffix == nil {
		return nil
	}
	host := strings.TrimRight(lowerASCII(hostname), ".")
	if t.hasPorts {
		if port == "" {
			switch scheme {
			case "https":
				port = "443"
			case "http":
				port = "80"
			}
		}
		if p := t.exact[net.JoinHostPort(host, port)]; p != nil {
			return p
		}
	}
	if p := t.exact[host]; p != nil {
		return p
	}
	for i := strings.IndexByte(host, '.'); i >= 0; {
		host = host[i+1:]
		if p := t.suffix[host]; p != nil {
			return p
		}
		i = strings.IndexByte(host, '.')
	}
	return nil
}

// A hostGate is a per-host mechanism that may hold a request's attempts
// back, as grpc-go's retry throttler does (ShouldThrottle, RecordSuccess):
// it is asked whether an attempt may go to a host, and told what becomes
// of the host's requests. It keeps its counts in the host's hostState, in
// a slot of its own.
//
// The gate is the mechanism's compiled policy: nil when the mechanism is
// off, and then admitting everything. Adding a mechanism takes a file of
// its own (its configuration, the gate, the per-host state), a Policy
// field (and its line in Policy.over), the line of Policy.compile that
// adds the gate (addGate), and a slot below; the attempt loop (call.go,
// decide.go, race.go) consults a request's gates (requestGates) without
// knowing which they are. A first attempt or a retry a gate refuses ends
// the request as throttled in the client (ReasonThrottled, ErrThrottled);
// a hedge refused is looked for again a hedge delay later.
type hostGate interface {
	// scope returns the kinds of attempts the gate is asked about and the
	// events it is told of; it is read once, as the policy is compiled. A
	// gate asked about no attempt a request may make hears nothing of that
	// request, and a request whose gates ask or hear nothing reads neither
	// the clock nor a random sample for them.
	scope() (attemptKind, hostEvent)

	// admit reports whether an attempt of kind k may go to host h at now
	// (on the monotonic scale: clock.Mono); rand gives uniform samples in
	// [0, 1) to a gate that decides by chance. Whatever the gate counts of
	// its own answer (a rejection, a hedge let go), it counts here.
	admit(h *hostState, k attemptKind, now int64, rand func() float64) bool

	// record tells the gate of event e at host h, at now.
	record(h *hostState, e hostEvent, now int64)
}

// attemptKind is what an attempt is to its request, as a gate sees it.
// Kinds combine into sets.
type attemptKind uint8

const (
	firstAttempt attemptKind = 1 << iota // a request's first attempt
	retryAttempt                         // an attempt after a failed one
	hedgeAttempt                         // a copy of an attempt not answered yet (Hedge)
)

// hostEvent is what a gate is told of a host's requests. Events combine
// into sets.
type hostEvent uint8

const (
	// requestStarts: a request sends its first attempt.
	requestStarts hostEvent = 1 << iota
	// hostAccepted: the host accepted an attempt whose outcome the request
	// acts on (of a race, the winner's, or the last failure): anything but
	// a transient failure.
	hostAccepted
	// hostRefused: such an outcome is a transient failure (a refused
	// connection, a 503, a 429...).
	hostRefused
)

// gateSet is a policy's gates, in the order they are asked, and what they
// ask and hear, for each set of kinds of attempts a request may make. Each
// gate keeps its state in a slot of its own, so a set has at most
// hostSlots gates, and makes nothing as it grows. The zero value has none.
type gateSet struct {
	gates [hostSlots]policyGate // the first n
	n     int
	scope [allAttempts + 1]gateScope // by the kinds of attempts a request may make
}

// A gateScope is what a set's gates are asked about, and told of.
type gateScope struct {
	asks  attemptKind
	hears hostEvent
}

// policyGate is a gate with its scope.
type policyGate struct {
	gate hostGate
	gateScope
}

const allAttempts = firstAttempt | retryAttempt | hedgeAttempt

// addGate adds g to s, unless g is nil: its mechanism is off.
func addGate[T any, G interface {
	*T
	hostGate
}](s *gateSet, g G) {
	if g == nil {
		return
	}
	asks, hears := g.scope()
	s.gates[s.n] = policyGate{gate: g, gateScope: gateScope{asks, hears}}
	s.n++
	for kinds := range s.scope {
		if asks&attemptKind(kinds) != 0 {
			s.scope[kinds].asks |= asks
			s.scope[kinds].hears |= hears
		}
	}
}

// requestGates are the gates of a request's policy, bound to the request's
// host once one of them concerns the request (call.mayMake): a gate
// concerns a request that may make an attempt the gate is asked about. The
// zero value has none: it asks and tells nothing, and admits every
// attempt.
type requestGates struct {
	host  *hostState
	set   *gateSet    // the policy's
	kinds attemptKind // the attempts the request may make
	scope gateScope   // of the gates that concern the request
}

// mayMake adds kinds to the attempts the request may make.
func (r *requestGates) mayMake(kinds attemptKind) {
	r.kinds |= kinds
	if r.set != nil {
		r.scope = r.set.scope[r.kinds]
	}
}

// concern reports whether a gate concerns the request.
func (r *requestGates) concern() bool { return r.scope.asks != 0 }

// asks reports whether a gate is asked about attempts of kind k.
func (r *requestGates) asks(k attemptKind) bool { return r.scope.asks&k != 0 }

// hears reports whether a gate is told of an event of set e.
func (r *requestGates) hears(e hostEvent) bool { return r.scope.hears&e != 0 }

// admit reports whether the gates asked about attempts of kind k let one
// go at now: the policy's gates are asked in turn, until one refuses.
func (r *requestGates) admit(k attemptKind, now int64, rand func() float64) bool {
	if r.scope.asks&k == 0 {
		return true
	}
	for i := range r.set.n {
		if g := &r.set.gates[i]; g.asks&k != 0 && g.asks&r.kinds != 0 && !g.gate.admit(r.host, k, now, rand) {
			return false
		}
	}
	return true
}

// record tells event e, at now, to the gates that hear of it.
func (r *requestGates) record(e hostEvent, now int64) {
	if r.scope.hears&e == 0 {
		return
	}
	for i := range r.set.n {
		if g := &r.set.gates[i]; g.hears&e != 0 && g.asks&r.kinds != 0 {
			g.gate.record(r.host, e, now)
		}
	}
}

// The slots of a hostState: one for each mechanism that keeps state per
// host, and what each holds.
const (
	throttleSlot = iota // *hostThrottle
	hedgeSlot           // *hostHedge
	hostSlots
)

// hostState is what a Transport keeps of one host for its mechanisms: a
// slot for each, made on the mechanism's first use at the host.
type hostState struct {
	host  string
	slots [hostSlots]atomic.Value
}

// stateIn returns the *T in slot of h, making it if need be. A slot holds
// one type.
func stateIn[T any](h *hostState, slot int) *T {
	s := &h.slots[slot]
	if v, ok := s.Load().(*T); ok {
		return v
	}
	s.CompareAndSwap(nil, new(T))
	return s.Load().(*T)
}

// maxHostStates is how many hosts a Transport keeps state for.
const maxHostStates = 1024

// hostStates holds a Transport's hostState for each of up to maxHostStates
// (1024) hosts, whatever mechanisms use them: a host beyond that replaces
// the one added first (oldest out), which starts afresh if it comes back.
// Looking a known host up takes no lock, and the host looked up last is
// found without hashing.
type hostStates struct {
	hosts sync.Map                  // host -> *hostState
	last  atomic.Pointer[hostState] // the state found or made last

	mu    sync.Mutex
	order []*hostState // in the order they were added, oldest first
}

// get returns the state of host, making it if need be.
func (m *hostStates) get(host string) *hostState {
	if h := m.last.Load(); h != nil && h.host == host {
		return h
	}
	if v, ok := m.hosts.Load(host); ok {
		h := v.(*hostState)
		m.last.Store(h)
		return h
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.hosts.Load(host); ok {
		return v.(*hostState)
	}
	h := &hostState{host: host}
	m.hosts.Store(host, h)
	m.order = append(m.order, h)
	if len(m.order) > maxHostStates {
		old := m.order[0]
		m.hosts.Delete(old.host)
		// (A get racing with this may still make old the last: it then
		// serves its host until another host is looked up, as it did
		// before it was forgotten.)
		m.last.CompareAndSwap(old, nil)
		m.order[0] = nil
		m.order = m.order[1:]
	}
	m.last.Store(h)
	return h
}
