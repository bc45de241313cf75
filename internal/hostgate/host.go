package hostgate

import "sync/atomic"

// The slots of a Host: one for each mechanism that keeps state per host,
// and what each holds.
const (
	throttleSlot = iota // *throttleState
	hedgeSlot           // *HedgeState
	numSlots
)

// Host is what a Transport keeps of one host for its gates: a slot for
// each, made on the mechanism's first use at the host. The Transport keeps
// it in its table of hosts (hosts.Registry), with the rest of what it knows
// of the host. The zero value is ready to use.
type Host struct {
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
