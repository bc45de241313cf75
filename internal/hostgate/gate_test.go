package hostgate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fakeGate records what it is asked and told, and refuses when told to.
type fakeGate struct {
	asks   Kind
	hears  Event
	refuse bool
	asked  []Kind
	told   []Event
}

func (g *fakeGate) scope() (Kind, Event) { return g.asks, g.hears }

func (g *fakeGate) admit(_ *Host, k Kind, _ int64, _ func() float64) bool {
	g.asked = append(g.asked, k)
	return !g.refuse
}

func (g *fakeGate) record(_ *Host, e Event, _ int64) { g.told = append(g.told, e) }

// A request without gates, or whose mechanisms are off, admits every
// attempt and tells nothing; a gate is asked and told only of what its
// scope names, and of requests that may make an attempt it is asked about.
func TestGatesAskAndTellWhatTheyGovern(t *testing.T) {
	var none Request
	assert.True(t, none.Admit(KindFirst|KindRetry|KindHedge, 1, nil))
	assert.False(t, none.Asks(KindFirst) || none.Hears(RequestStarts|Accepted|Refused))
	var off Set
	Add(&off, (*Throttle)(nil))
	Add(&off, (*Hedge)(nil))
	assert.Zero(t, off.Len(), "mechanisms off: no gate")
	assert.True(t, (*Throttle)(nil).admit(nil, KindFirst, 1, nil), "a nil gate admits")

	hedges := &fakeGate{asks: KindHedge, hears: RequestStarts, refuse: true}
	answers := &fakeGate{asks: KindFirst | KindRetry, hears: Accepted | Refused}
	var host Host
	var set Set
	Add(&set, hedges)
	Add(&set, answers)
	var r Request
	r.Use(&set)
	r.MayMake(KindFirst|KindRetry, &host)
	assert.Same(t, &host, r.Host(), "bound to its host")
	assert.True(t, r.Admit(KindFirst, 1, nil))
	r.Record(RequestStarts, 1)
	r.Record(Refused, 1)
	assert.False(t, r.Hears(RequestStarts), "the request may not be hedged: the hedges' gate hears nothing of it")
	assert.Empty(t, hedges.asked)
	assert.Empty(t, hedges.told)
	assert.Equal(t, []Kind{KindFirst}, answers.asked)
	assert.Equal(t, []Event{Refused}, answers.told)

	r.MayMake(KindHedge, &host)
	r.Record(RequestStarts, 1)
	assert.False(t, r.Admit(KindHedge, 1, nil), "the hedges' gate refuses")
	assert.Equal(t, []Event{RequestStarts}, hedges.told)
	assert.Equal(t, []Kind{KindHedge}, hedges.asked)
	assert.Equal(t, []Kind{KindFirst}, answers.asked, "not asked about hedges")
}

// Each mechanism's state at a host is made on its first use, once, in a
// slot of its own.
func TestHostStateSlots(t *testing.T) {
	h := new(Host)
	assert.Nil(t, h.slots[throttleSlot].Load(), "nothing made before use")
	th := stateIn[throttleState](h, throttleSlot)
	assert.Same(t, th, stateIn[throttleState](h, throttleSlot))
	assert.Nil(t, h.slots[hedgeSlot].Load(), "each slot is made on its own")
	assert.Same(t, HedgeOf(h), HedgeOf(h))
}
