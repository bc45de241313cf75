package retryhttp

// A Transport keeps what it learns of each host in one table, looked up
// once per request: throttling and hedging's state, the budget's account,
// the counters. Past 1024 hosts, idle ones are forgotten, oldest first.

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/hostgate"
	"github.com/retryhttp/retryhttp/internal/hosts"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// One entry of the table serves every mechanism at a host: the hedge
// latencies, the budget's account, the counters; a second host gets its own.
func TestOneEntryServesEveryMechanismOfAHost(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(200)}
	tr := &Transport{Base: base, TrackHosts: 10, Policy: Policy{
		Throttle: &Throttle{}, Hedge: &Hedge{After: time.Hour}}}
	for _, url := range []string{"http://A.test/", "http://a.test/x", "http://b.test/"} {
		sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, url, nil))
	}
	require.Equal(t, 2, tr.table.Len(), "a.test and b.test")
	a, ok := tr.table.Lookup("a.test")
	require.True(t, ok)
	require.NotNil(t, a.counters)
	assert.EqualValues(t, 2, a.counters.stats().Requests)
	require.NotNil(t, a.account.Load(), "the budget's account, held by the entry")
	assert.Same(t, a.account.Load(), tr.accounts.Start("a.test"), "the budget's own")
	assert.Positive(t, hostgate.HedgeOf(&a.gate).Delay(&hostgate.Hedge{Max: time.Hour, Quantile: 0.5}),
		"hedging's state in the entry")
	b, _ := tr.table.Lookup("b.test")
	assert.NotSame(t, a, b)
	assert.EqualValues(t, 1, tr.HostStats()["b.test"].Requests)
}

// Past 1024 hosts, the Transport forgets the idle ones, oldest first: a
// tracked host forgotten leaves HostStats and makes room for another,
// while a host with a request in flight is kept, its counters with it.
func TestTheTableForgetsIdleHostsPast1024(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Host == "busy.test" {
				<-release
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := &Transport{Base: base, TrackHosts: 2}
		get := func(host string) {
			sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, "http://"+host+"/", nil))
		}
		get("first.test")
		done := make(chan struct{})
		go func() { get("busy.test"); close(done) }()
		synctest.Wait()
		for i := range hosts.Most - 2 {
			get(fmt.Sprintf("h%d.test", i))
		}
		require.Equal(t, hosts.Most, tr.table.Len())
		require.Len(t, tr.HostStats(), 2, "first.test and busy.test tracked, no room for more")
		get("last.test") // the 1025th host
		assert.Equal(t, hosts.Most/2+1, tr.table.Len(), "down to 512, and last.test")
		hs := tr.HostStats()
		assert.NotContains(t, hs, "first.test", "idle, the oldest: forgotten")
		assert.Contains(t, hs, "busy.test", "in flight: kept")
		assert.Contains(t, hs, "last.test", "in first.test's room")
		close(release)
		<-done
		assert.EqualValues(t, 1, tr.HostStats()["busy.test"].Requests)
	})
}
