package hosts

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// value is a registry's V in these tests: busy ones may not be forgotten.
type value struct {
	busy      atomic.Bool
	forgotten atomic.Bool
	made      int
}

func (v *value) Forget() bool {
	if v.busy.Load() {
		return false
	}
	v.forgotten.Store(true)
	return true
}

// Past Most hosts, the hosts that may be forgotten are, oldest first, down
// to half of Most, before the new host joins; a busy host is kept, and a
// forgotten one, asked about again, starts afresh.
func TestARegistryPastMostForgetsTheOldestIdleHalf(t *testing.T) {
	var r Registry[value, *value]
	vs := make([]*value, Most)
	for i := range vs {
		vs[i] = r.Get("h"+strconv.Itoa(i), nil)
	}
	vs[1].busy.Store(true)
	require.Equal(t, Most, r.Len(), "Most hosts: every one kept")
	r.Get("new", nil)
	assert.Equal(t, Most/2+1, r.Len(), "half of Most kept, and the new one")
	assert.True(t, vs[0].forgotten.Load(), "the oldest, idle, forgotten")
	assert.False(t, vs[1].forgotten.Load(), "the busy one kept")
	assert.Same(t, vs[1], r.Get("h1", nil))
	assert.True(t, vs[Most/2].forgotten.Load(), "forgotten down to half: the busy one counts")
	assert.Same(t, vs[Most/2+1], r.Get("h"+strconv.Itoa(Most/2+1), nil), "the newer half kept")
	v, ok := r.Lookup("h0")
	assert.False(t, ok, "h0 is forgotten")
	assert.Nil(t, v)
	assert.NotSame(t, vs[0], r.Get("h0", nil), "h0 starts afresh")
}

// Get sets a new host's V up with init, once; hosts are named in lower case.
func TestARegistryMakesEachHostOnce(t *testing.T) {
	var r Registry[value, *value]
	made := 0
	init := func(v *value) { made++; v.made = made }
	a := r.Get("API.test:443", init)
	assert.Same(t, a, r.Get("api.test:443", init), "names compare in lower case")
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, a.made)
	var names []string
	r.Range(func(name string, _ *value) bool { names = append(names, name); return true })
	assert.Equal(t, []string{"api.test:443"}, names)
}

// Each host has its own V, found again whichever host was looked up last,
// and from any goroutine.
func TestARegistryFindsEachHostsOwn(t *testing.T) {
	var r Registry[value, *value]
	a, b := r.Get("a.test", nil), r.Get("b.test", nil)
	require.NotSame(t, a, b)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 1000 {
				want, host := a, "a.test"
				if (i+j)%3 == 0 {
					want, host = b, "b.test"
				}
				if got := r.Get(host, nil); got != want {
					t.Errorf("%s: another host's value", host)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A host forgotten while a Lookup held it as the last one found is not
// found again: the registry makes it anew.
func TestAForgottenLastHostIsNotFoundAgain(t *testing.T) {
	var r Registry[value, *value]
	first := r.Get("h0", nil)
	e := r.last.Load()
	for i := 1; i <= Most; i++ {
		r.Get("h"+strconv.Itoa(i), nil)
	}
	require.True(t, first.forgotten.Load())
	r.last.Store(e) // as a Lookup that raced with the forgetting would leave it
	assert.NotSame(t, first, r.Get("h0", nil))
}
