package hosts

import (
	"sync"
	"sync/atomic"
)

// Most is how many hosts a Registry keeps before it forgets some.
const Most = 1024

// A Registry keeps a V for each host it is asked about: a Transport's state
// of its hosts, a Budget's accounts. Hosts are named by Lower. Looking a
// known host up takes no lock, and the host looked up last is found
// without hashing. The zero value is empty.
//
// It forgets by one rule: before a host joins past Most hosts, the hosts
// whose Forget lets them go (nothing in flight uses them) are forgotten,
// oldest first, down to half of Most. A forgotten host's V stays with
// those holding it; the host, asked about again, gets a new one.
type Registry[V any, P interface {
	*V
	Forget() bool // reports whether v may be forgotten, and if so marks it so
}] struct {
	m    sync.Map                 // name -> *entry[V]
	last atomic.Pointer[entry[V]] // the entry found or made last

	mu    sync.Mutex
	order []*entry[V] // in the order they joined, oldest first
}

type entry[V any] struct {
	name string
	gone atomic.Bool // forgotten: a Lookup racing with forgetLocked may still hold it
	v    V
}

// Lookup returns the V of host, if the registry keeps one.
func (r *Registry[V, P]) Lookup(host string) (*V, bool) {
	name := Lower(host)
	if e := r.last.Load(); e != nil && e.name == name && !e.gone.Load() {
		return &e.v, true
	}
	if x, ok := r.m.Load(name); ok {
		if e := x.(*entry[V]); !e.gone.Load() {
			r.last.Store(e)
			return &e.v, true
		}
	}
	return nil, false
}

// Get returns the V of host, making it if need be: init, if not nil, sets
// a new one up before anyone else sees it.
func (r *Registry[V, P]) Get(host string, init func(*V)) *V {
	if v, ok := r.Lookup(host); ok {
		return v
	}
	name := Lower(host)
	r.mu.Lock()
	defer r.mu.Unlock()
	if x, ok := r.m.Load(name); ok {
		return &x.(*entry[V]).v
	}
	if len(r.order) >= Most {
		r.forgetLocked()
	}
	e := &entry[V]{name: name}
	if init != nil {
		init(&e.v)
	}
	r.m.Store(name, e)
	r.order = append(r.order, e)
	r.last.Store(e)
	return &e.v
}

// forgetLocked forgets the oldest hosts that may be forgotten, down to half
// of Most if it can. Requires r.mu held.
func (r *Registry[V, P]) forgetLocked() {
	excess := len(r.order) - Most/2
	kept := r.order[:0]
	for _, e := range r.order {
		if excess > 0 && P(&e.v).Forget() {
			e.gone.Store(true)
			r.m.Delete(e.name)
			r.last.CompareAndSwap(e, nil)
			excess--
			continue
		}
		kept = append(kept, e)
	}
	clear(r.order[len(kept):])
	r.order = kept
}

// Len returns how many hosts the registry keeps.
func (r *Registry[V, P]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// Range calls f for each host kept, with its name, until f returns false.
func (r *Registry[V, P]) Range(f func(name string, v *V) bool) {
	r.m.Range(func(_, x any) bool {
		e := x.(*entry[V])
		return f(e.name, &e.v)
	})
}
