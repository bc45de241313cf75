package hostgate

import (
	"sync"
	"sync/atomic"
)

// The slots of a Host: one for each mechanism that keeps state per host,
// and what each holds.
const (
	throttleSlot = iota // *throttleState
	hedgeSlot           // *HedgeState
	numSlots
)

// Host is what a Transport keeps of one host for its gates: a slot for
// each, made on the mechanism's first use at the host.
type Host struct {
	name  string
	slots [numSlots]atomic.Value
}

// stateIn returns the *T in slot of h, making it if need be. A slot holds
// one type.
func stateIn[T any](h *Host, slot int) *T {
	s := &h.slots[slot]
	if v, ok := s.Load().(*T); ok {
		return v
	}
	s.CompareAndSwap(nil, new(T))
	return s.Load().(*T)
}

// maxHosts is how many hosts a Transport keeps state for.
const maxHosts = 1024

// Hosts holds a Transport's Host for each of up to maxHosts (1024) hosts,
// whatever gates use them: a host beyond that replaces the one added
// first (oldest out), which starts afresh if it comes back. Looking a
// known host up takes no lock, and the host looked up last is found
// without hashing. The zero value is empty.
type Hosts struct {
	hosts sync.Map             // name -> *Host
	last  atomic.Pointer[Host] // the host found or made last

	mu    sync.Mutex
	order []*Host // in the order they were added, oldest first
}

// Get returns the state of host (a URL's host, port included), making it
// if need be.
func (m *Hosts) Get(host string) *Host {
	host = lower(host)
	if h := m.last.Load(); h != nil && h.name == host {
		return h
	}
	if v, ok := m.hosts.Load(host); ok {
		h := v.(*Host)
		m.last.Store(h)
		return h
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.hosts.Load(host); ok {
		return v.(*Host)
	}
	h := &Host{name: host}
	m.hosts.Store(host, h)
	m.order = append(m.order, h)
	if len(m.order) > maxHosts {
		old := m.order[0]
		m.hosts.Delete(old.name)
		// (A Get racing with this may still make old the last: it then
		// serves its host until another host is looked up, as it did
		// before it was forgotten.)
		m.last.CompareAndSwap(old, nil)
		m.order[0] = nil
		m.order = m.order[1:]
	}
	m.last.Store(h)
	return h
}
