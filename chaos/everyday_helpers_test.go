package chaos

// The machinery of TestEverydayRealFaults (everyday_test.go): one call
// through a client, and the server of fault 4. Faults 2 and 3, the load's
// schedule and the lag probe are the core's, in internal/testutil.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// everydayDeadline is each call's context deadline, from its start to the
// end of reading its answer's body.
const everydayDeadline = 10 * time.Second

// An everydayOutcome is how one call ended.
type everydayOutcome struct {
	post     bool
	served   bool // a 200 whose body was read to its end
	attempts int  // as the transport beneath the client counted them
	why      string
}

// everydaySend makes call id, req (testutil.NewCall's), through rt within
// everydayDeadline, with no idempotency key (a client may add one). It
// reads the answer's body to its end and closes it.
func everydaySend(rt http.RoundTripper, id int, req *http.Request) everydayOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), everydayDeadline)
	defer cancel()
	cl := &call{id: id}
	o := everydayOutcome{post: req.Method == http.MethodPost}
	resp, err := rt.RoundTrip(req.WithContext(withCall(ctx, cl)))
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			o.why = fmt.Sprintf("%d, then its body: %s", resp.StatusCode, errKind(err))
		case resp.StatusCode != http.StatusOK:
			o.why = resp.Status
		default:
			o.served = true
		}
	} else {
		o.why = errKind(err)
	}
	o.why = loopbackAddr.ReplaceAllString(o.why, "127.0.0.1:*")
	o.attempts = int(cl.attempts.Load())
	return o
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// ---- fault 4: a server admitting 20 requests a second ----

// rateLimited admits perSecond requests a second (a token bucket holding
// perSecond, full at the start) and answers the others 429 with
// Retry-After: 1. Every answer takes latency.
type rateLimited struct {
	perSecond float64
	latency   time.Duration

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	admitted int
	refused  int
}

func newRateLimited(perSecond float64, latency time.Duration) *rateLimited {
	return &rateLimited{perSecond: perSecond, latency: latency, tokens: perSecond, last: time.Now()}
}

func (s *rateLimited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	timer := time.NewTimer(s.latency)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	now := time.Now()
	s.tokens = min(s.perSecond, s.tokens+s.perSecond*now.Sub(s.last).Seconds())
	s.last = now
	ok := s.tokens >= 1
	if ok {
		s.tokens--
		s.admitted++
	} else {
		s.refused++
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}
