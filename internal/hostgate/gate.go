// Package hostgate holds a Transport's gates: the per-host mechanisms that
// may hold a request's attempts back (adaptive throttling, the hedge
// fraction), and the state each keeps of a host.
package hostgate

// A Gate is a per-host mechanism that may hold a request's attempts back,
// as grpc-go's retry throttler does (ShouldThrottle, RecordSuccess): it is
// asked whether an attempt may go to a host, and told what becomes of the
// host's requests. It keeps its counts in the host's Host, in a slot of
// its own.
//
// The gate is the mechanism's compiled policy: nil when the mechanism is
// off, and then admitting everything. Adding a mechanism takes a file of
// its own here (the gate and its per-host state) and a slot below, and in
// the root its configuration, a Policy field (and its line in
// Policy.over), and the line of Policy.compile that adds the gate (Add).
// The attempt loop consults a request's gates (Request) without knowing
// which they are. A first attempt or a retry a gate refuses ends the
// request as throttled in the client (ReasonThrottled); a
// hedge refused is looked for again a hedge delay later.
type Gate interface {
	// scope returns the kinds of attempts the gate is asked about and the
	// events it is told of; it is read once, as the policy is compiled. A
	// gate asked about no attempt a request may make hears nothing of that
	// request, and a request whose gates ask or hear nothing reads neither
	// the clock nor a random sample for them.
	scope() (Kind, Event)

	// admit reports whether an attempt of kind k may go to host h at now
	// (on the monotonic scale: clock.Mono); rand gives uniform samples in
	// [0, 1) to a gate that decides by chance. Whatever the gate counts of
	// its own answer (a rejection, a hedge let go), it counts here.
	admit(h *Host, k Kind, now int64, rand func() float64) bool

	// record tells the gate of event e at host h, at now.
	record(h *Host, e Event, now int64)
}

// Kind is what an attempt is to its request, as a gate sees it. Kinds
// combine into sets.
type Kind uint8

// The kinds of attempts.
const (
	KindFirst Kind = 1 << iota // a request's first attempt
	KindRetry                  // an attempt after a failed one
	KindHedge                  // a copy of an attempt not answered yet
	allKinds  = KindFirst | KindRetry | KindHedge
)

// Event is what a gate is told of a host's requests. Events combine into
// sets.
type Event uint8

// The events.
const (
	// RequestStarts: a request sends its first attempt.
	RequestStarts Event = 1 << iota
	// Accepted: the host accepted an attempt whose outcome the request
	// acts on (of a race of hedged attempts, the winner's, or the last
	// failure): anything but a transient failure.
	Accepted
	// Refused: such an outcome is a transient failure (a refused
	// connection, a 503, a 429...).
	Refused
)

// Set is a policy's gates, in the order they are asked, and what they ask
// and hear, for each set of kinds of attempts a request may make. Each gate
// keeps its state in a slot of its own, so a set has at most numSlots
// gates, and makes nothing as it grows. The zero value has none.
type Set struct {
	gates [numSlots]setGate // the first n
	n     int
	scope [allKinds + 1]scope // by the kinds of attempts a request may make
}

// A scope is what gates are asked about, and told of.
type scope struct {
	asks  Kind
	hears Event
}

// setGate is a gate with its scope.
type setGate struct {
	gate Gate
	scope
}

// Add adds g to s, unless g is nil: its mechanism is off.
func Add[T any, G interface {
	*T
	Gate
}](s *Set, g G) {
	if g == nil {
		return
	}
	asks, hears := g.scope()
	s.gates[s.n] = setGate{gate: g, scope: scope{asks, hears}}
	s.n++
	for kinds := range s.scope {
		if asks&Kind(kinds) != 0 {
			s.scope[kinds].asks |= asks
			s.scope[kinds].hears |= hears
		}
	}
}

// Len returns the number of gates in s.
func (s *Set) Len() int { return s.n }

// Request is the gates of a request's policy, bound to the request's host
// once one of them concerns the request (MayMake): a gate concerns a
// request that may make an attempt the gate is asked about. The zero value
// has none: it asks and tells nothing, and admits every attempt.
type Request struct {
	host  *Host
	set   *Set  // the policy's
	kinds Kind  // the attempts the request may make
	scope scope // of the gates that concern the request
}

// Use gives the request the gates of set.
func (r *Request) Use(set *Set) { r.set = set }

// Used reports whether the request has its policy's gates (Use).
func (r *Request) Used() bool { return r.set != nil }

// MayMake adds kinds to the attempts the request may make, and binds the
// request to host, its URL's, once a gate concerns it.
func (r *Request) MayMake(kinds Kind, host *Host) {
	r.kinds |= kinds
	if r.set != nil {
		r.scope = r.set.scope[r.kinds]
	}
	if r.host == nil && r.scope.asks != 0 {
		r.host = host
	}
}

// Host returns the host the request is bound to, or nil.
func (r *Request) Host() *Host { return r.host }

// Asks reports whether a gate is asked about attempts of kind k.
func (r *Request) Asks(k Kind) bool { return r.scope.asks&k != 0 }

// Hears reports whether a gate is told of an event of set e.
func (r *Request) Hears(e Event) bool { return r.scope.hears&e != 0 }

// Admit reports whether the gates asked about attempts of kind k let one go
// at now: the policy's gates are asked in turn, until one refuses.
func (r *Request) Admit(k Kind, now int64, rand func() float64) bool {
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

// Record tells event e, at now, to the gates that hear of it.
func (r *Request) Record(e Event, now int64) {
	if r.scope.hears&e == 0 {
		return
	}
	for i := range r.set.n {
		if g := &r.set.gates[i]; g.hears&e != 0 && g.asks&r.kinds != 0 {
			g.gate.record(r.host, e, now)
		}
	}
}
