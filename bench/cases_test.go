package bench

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The opt-ins path's check fails a retryhttp Transport that acted on a
// request: one that retried it, or hedged it. It passes one that sent each
// request once, and has nothing to say of another library.
func TestNotActedSeesAPolicyAct(t *testing.T) {
	get := func(rt http.RoundTripper) {
		t.Helper()
		if err := reader(sendThrough(rt, http.MethodGet, target, nil), Realistic)(); err != nil {
			t.Fatal(err)
		}
	}

	once := &retryhttp.Transport{Base: &Canned{}}
	get(once)
	if err := notActed(once, 1); err != nil {
		t.Errorf("a request sent once: %v", err)
	}
	if err := notActed(&Canned{}, 1); err != nil {
		t.Errorf("the bare base: %v", err)
	}

	retried := &retryhttp.Transport{
		Base:   &Canned{Script: []int{http.StatusServiceUnavailable, http.StatusOK}},
		Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)},
		Budget: retryhttp.UnlimitedBudget(),
	}
	get(retried)
	if err := notActed(retried, 1); err == nil || !strings.Contains(err.Error(), "2 attempts") {
		t.Errorf("a retried request: %v, want an error counting 2 attempts", err)
	}

	synctest.Test(t, func(t *testing.T) {
		hedged := &retryhttp.Transport{
			Base:   &slowFirst{slow: time.Second},
			Policy: retryhttp.Policy{Hedge: &retryhttp.Hedge{Delay: 10 * time.Millisecond}},
		}
		get(hedged)
		if err := notActed(hedged, 1); err == nil || !strings.Contains(err.Error(), "1 hedges") {
			t.Errorf("a hedged request: %v, want an error counting 1 hedge", err)
		}
	})
}

// slowFirst answers its first attempt after slow, unless the attempt is
// canceled first, and every other at once, all with 200.
type slowFirst struct {
	slow  time.Duration
	calls atomic.Int32
}

func (s *slowFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.calls.Add(1) == 1 {
		select {
		case <-time.After(s.slow):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	resp := new(http.Response)
	realisticOK[0].fill(resp, http.StatusOK, req, &body{b: realisticOK[0].body})
	return resp, nil
}
