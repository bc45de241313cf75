package sim

// The simulation's requests: methods, keys, SDK retry headers, bodies
// (re-creatable, buffered, streamed, lying about their length, stalling),
// contexts (deadlines, cancellations, policies, a type of their own), and
// the caller that sends them and reads the answer.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

type simReqKey struct{}

// reqOf returns the simulated request whose context ctx is, or derives from.
func reqOf(ctx context.Context) *simReq {
	r, _ := ctx.Value(simReqKey{}).(*simReq)
	return r
}

// simReq is one request of the simulation: what it is, and what happened.
type simReq struct {
	id          int
	method, url string
	header      http.Header
	callerKey   string // the caller's idempotency key as sent (trimmed), or ""
	sdkAttempt  int    // the attempt an SDK above says this is (0: none)
	bodyKind    string
	payload     []byte
	pauseAt     int
	pause       time.Duration // the caller's body stalls once, after pauseAt bytes
	getBodyFail int           // the GetBody call that fails (0: none)
	lengthLie   int64         // added to ContentLength: the body is longer or shorter
	hasDeadline bool
	deadline    time.Duration // from the request's start
	cancelAt    time.Duration // the caller cancels then (0: never)
	gaveUp      bool          // the caller canceled after simPatience calls (see simServer)
	warm        bool          // the warm-up's successes (see warmUp): none of the others' fields is set
	custom      bool          // the context is a testutil.OpaqueCtx
	stale       bool          // the context holds a finished attempt's mark
	overrides   []simOverride
	after       time.Duration // sent so long after the seed started (concurrent seeds)
	pol         simPolicy     // the policy it follows
	innerMax    int           // the MaxAttempts of a nested Transport for it
	prior       int           // attempts of the caller's key before it; -1: unknown
	verdict     string        // the X-Should-Retry of the AdviceHandler it was made inside
	draws       []simDraw     // the calls of its policy's Backoff, in a seed that sends one at a time
	gap         time.Duration // sent so long after the request before ended (see hostWaitRequest)

	cancel     func()
	req        *http.Request
	snap       simSnapshot
	start, end time.Time
	deadlineAt time.Time
	resp       *http.Response
	err        error
	panicked   any
	got        []byte
	readErr    error
	readEnd    time.Time
	readCut    bool // the caller closed the body before its end (it stalled)
	deaf       bool // an answer's body stalled deaf to contexts: the caller's read ends when it will
	partial    int  // the caller reads so many bytes of the body, then closes it (0: all)
	// The request ended a century after its seed started (it waited a
	// huge backoff or Retry-After): the bubble's clock is near the end of
	// the runtime's time, where every timer fires at once, so its timing
	// is not checked, and the seed ends.
	pastHorizon bool

	// Recorded as the request goes, under sim.mu.
	bodies    []*simBody // the caller's and GetBody's
	getBodies int
	attempts  []*simAttempt // as the Transport under test sent them
	calls     []*simCall    // as the server got them
	dups      map[int]int
	retries   []simRetry
	giveUps   []retryhttp.GiveUpEvent
	prepFails int
	judging   time.Duration       // in the policy's Retryable: a peek at a stalled body is its attempt's time
	verdicts  []simVerdict        // the outcomes its policy's Retryable saw, in order
	timeline  []retryhttp.Attempt // what retryhttp.Timeline returned as RoundTrip returned
	// The caller canceled as an answer arrived (see cancelAtAnswer), at
	// canceledAt: cancelAt after the start, or a nanosecond before if at it.
	canceledAtAnswer bool
	canceledAt       time.Time

	// Of a seed whose hosts serve resumable bodies (see drawResume).
	res            *simResource  // the body its host serves to a GET, and its versions
	readG          string        // the goroutine that reads its response body, once RoundTrip returned
	given, pending int           // bytes the caller's reads returned, and those a cut gave with its error since
	resumeAttempts []*simAttempt // the attempts that asked for the rest (Range), as the base got them
	resumeCalls    []*simCall    // ... and as the server got them
	resumeRetries  []simRetry    // OnRetry's events while the body was read
	resumeGiveUps  []retryhttp.GiveUpEvent
}

type simOverride struct {
	p    retryhttp.Policy
	none bool // WithPolicy(ctx, Policy{MaxAttempts: 1})
}

func idempotentMethod(m string) bool {
	switch m {
	case "", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// newRequest draws request id.
func (s *sim) newRequest(id int) *simReq {
	rng := s.rng
	r := &simReq{id: id, dups: make(map[int]int)}
	r.method = pick(rng, "GET", "GET", "GET", "POST", "POST", "POST", "PUT", "DELETE", "PATCH", "PATCH",
		"HEAD", "OPTIONS", "post", "")
	r.url = fmt.Sprintf("http://%s/r/%d", pick(rng, "a.sim", "b.sim:8080", "x.a.sim", "c.other"), id)
	if s.cfg.burst || s.cfg.warm > 0 {
		r.url = fmt.Sprintf("http://a.sim/r/%d", id)
	}
	if rng.IntN(4) == 0 {
		r.url += "?q=1&sig=x"
	}
	r.header = http.Header{"X-Sim": {strconv.Itoa(id)}}
	if rng.IntN(20) == 0 {
		r.header = nil
	}
	s.drawKey(r)
	if rng.IntN(10) == 0 {
		hs := []struct {
			name, value string
			n           int
		}{{"Amz-Sdk-Request", "attempt=2; max=3", 2}, {"Amz-Sdk-Request", "attempt=1; max=3", 1},
			{"X-Stainless-Retry-Count", "1", 2}, {"X-Stainless-Retry-Count", "0", 1}, {"X-Stainless-Retry-Count", "x", 0}}
		h := hs[rng.IntN(len(hs))]
		r.header = cloneOrNew(r.header)
		r.header.Set(h.name, h.value)
		r.sdkAttempt = h.n
		s.count("SDK retry header")
	}
	if rand.New(rand.NewPCG(s.seed, uint64(id)<<32|5)).IntN(20) == 0 {
		// At the bound of the attempts the headers name, 1<<20 (a stream of
		// its own, so that the other draws stay).
		hs := []struct {
			name, value string
			n           int
		}{{"Amz-Sdk-Request", "attempt=1048576; max=1048576", 1 << 20}, {"X-Stainless-Retry-Count", "1048575", 1 << 20},
			{"Amz-Sdk-Request", "attempt=1048577", 0}, {"X-Stainless-Retry-Count", "1048576", 0}}
		h := hs[rand.New(rand.NewPCG(s.seed, uint64(id)<<32|6)).IntN(len(hs))]
		r.header = cloneOrNew(r.header)
		r.header.Del("Amz-Sdk-Request")
		r.header.Del("X-Stainless-Retry-Count")
		r.header.Set(h.name, h.value)
		r.sdkAttempt = h.n
		s.count("SDK retry header at its bound")
	}
	s.drawBody(r)
	s.drawContext(r)
	if race := rand.New(rand.NewPCG(s.seed, uint64(id)<<32|7)); s.cfg.racing && !s.cfg.raceMore && race.IntN(2) == 0 {
		// A deadline that falls while the race's answers come in.
		r.hasDeadline, r.deadline = true, time.Duration(5+race.IntN(80))*time.Millisecond
		s.count("deadline within the race")
	}
	r.url = s.freshHost(r.url, id)
	s.hostWaitRequest(r)
	s.timelineRequest(r)
	s.resumeRequest(r)
	u, _ := url.Parse(r.url)
	layers := make([]retryhttp.Policy, 0, len(r.overrides)+2)
	for i := len(r.overrides) - 1; i >= 0; i-- {
		o := r.overrides[i]
		if o.none {
			o.p = retryhttp.Policy{MaxAttempts: 1}
		}
		layers = append(layers, o.p)
	}
	r.innerMax = layered(append(layers[:len(layers):len(layers)], simInnerPolicy)...).max
	if p, ok := hostEntry(s.cfg.hosts, u); ok {
		layers = append(layers, p)
	}
	r.pol = layered(append(layers, s.cfg.policy)...)
	return r
}

func cloneOrNew(h http.Header) http.Header {
	if h == nil {
		return make(http.Header)
	}
	return h
}

// drawKey gives some requests a key of the caller's: a new one, or the
// key of an earlier request (an SDK's retry), or a blank one (no key).
func (s *sim) drawKey(r *simReq) {
	rng := s.rng
	if rng.IntN(5) >= 2 || (idempotentMethod(r.method) && rng.IntN(4) != 0) {
		return
	}
	key := fmt.Sprintf("caller-%d-%d", s.seed, r.id)
	for _, prev := range s.reqs {
		if prev.callerKey != "" && rng.IntN(3) == 0 {
			key = prev.callerKey
			s.count("caller's key of an earlier request")
		}
	}
	r.header = cloneOrNew(r.header)
	switch rng.IntN(4) {
	case 0:
		r.header.Set("Idempotency-Key", key)
	case 1:
		r.header["idempotency-key"] = []string{" " + key}
	case 2:
		r.header.Set("X-Idempotency-Key", key)
	case 3:
		r.header.Set("Idempotency-Key", " \t")
		return
	}
	r.callerKey = key
	s.count("caller's key")
}

func (s *sim) drawBody(r *simReq) {
	rng := s.rng
	r.bodyKind = pick(rng, "none", "none", "none", "none", "none", "none", "NoBody", "GetBody", "GetBody",
		"GetBody", "GetBody fails", "buffered", "buffered", "buffered", "stream", "stream", "stream CL 0",
		"wrong length", "paused", "big")
	s.count("request body: " + r.bodyKind)
	if r.bodyKind == "none" || r.bodyKind == "NoBody" {
		return
	}
	size := pick(rng, 2+rng.IntN(100), 2+rng.IntN(4000))
	if r.bodyKind == "big" {
		size = 70000
	}
	r.payload = make([]byte, size)
	for i := range r.payload {
		r.payload[i] = byte(rng.UintN(256))
	}
	switch r.bodyKind {
	case "paused":
		r.bodyKind = pick(rng, "buffered", "stream", "GetBody")
		r.pauseAt = rng.IntN(size + 1)
		r.pause = pick(rng, 10*time.Millisecond, time.Second, 20*time.Second)
	case "GetBody fails":
		r.getBodyFail = 1 + rng.IntN(2)
	case "wrong length":
		r.lengthLie = pick(rng, int64(-1), 5)
	}
}

func (s *sim) drawContext(r *simReq) {
	rng := s.rng
	if rng.IntN(20) < 9 {
		r.hasDeadline = true
		r.deadline = pick(rng, 0, time.Millisecond, 30*time.Millisecond, 300*time.Millisecond,
			2*time.Second, 10*time.Second, 60*time.Second)
		s.count("deadline")
	}
	if rng.IntN(10) == 0 {
		r.cancelAt = time.Duration(1+rng.IntN(3000)) * time.Millisecond
		s.count("caller cancels")
	}
	r.custom = rng.IntN(10) == 0
	r.stale = rng.IntN(20) == 0
	switch rng.IntN(20) {
	case 0, 1, 2:
		r.overrides = []simOverride{{p: s.drawPolicy(fmt.Sprintf("request %d WithPolicy", r.id))}}
	case 3:
		r.overrides = []simOverride{{none: true}}
	case 4:
		r.overrides = []simOverride{{p: s.drawPolicy(fmt.Sprintf("request %d WithPolicy", r.id))}, {none: rng.IntN(2) == 0}}
	}
	switch {
	case s.cfg.burst:
		r.after = time.Duration(rng.IntN(20)) * time.Millisecond
	case s.cfg.concurrent:
		r.after = time.Duration(rng.IntN(500)) * time.Millisecond
	}
	if rng.IntN(10) == 0 {
		r.partial = 1 + rng.IntN(100)
		s.count("caller reads part of the body")
	}
}

// context returns the request's context, and sets r.cancel to end it.
func (s *sim) context(r *simReq) context.Context {
	ctx := context.WithValue(context.Background(), simReqKey{}, r)
	var cancels []func()
	if r.hasDeadline {
		r.deadlineAt = time.Now().Add(r.deadline)
		var cancel func()
		ctx, cancel = context.WithDeadline(ctx, r.deadlineAt)
		cancels = append(cancels, cancel)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancels = append(cancels, cancel)
	if r.cancelAt > 0 {
		t := time.AfterFunc(r.cancelAt, cancel)
		cancels = append(cancels, func() { t.Stop() })
	}
	if r.custom {
		ctx = testutil.NewOpaqueCtx(ctx)
	}
	for _, o := range r.overrides {
		if o.none {
			ctx = retryhttp.WithPolicy(ctx, retryhttp.Policy{MaxAttempts: 1})
		} else {
			ctx = retryhttp.WithPolicy(ctx, o.p)
		}
	}
	if r.stale {
		marked := mark.New(ctx, 1)
		marked.Mark.Done()
		ctx = marked
	}
	r.cancel = func() {
		for _, c := range cancels {
			c()
		}
	}
	return ctx
}

// build makes the caller's request.
func (s *sim) buildRequest(r *simReq, ctx context.Context) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		panic(err)
	}
	req.Method, req.Header = r.method, r.header.Clone()
	if r.payload == nil {
		if r.bodyKind == "NoBody" {
			req.Body = http.NoBody
		}
		return req
	}
	req.Body, req.ContentLength = s.newBody(r, true), int64(len(r.payload))
	switch r.bodyKind {
	case "GetBody", "GetBody fails":
		req.GetBody = func() (io.ReadCloser, error) {
			s.mu.Lock()
			r.getBodies++
			n := r.getBodies
			s.mu.Unlock()
			if n == r.getBodyFail {
				s.count("GetBody fails")
				if n == 2 {
					return nil, nil
				}
				return nil, errors.New("sim: GetBody failed")
			}
			return s.newBody(r, false), nil
		}
	case "stream":
		req.ContentLength = -1
	case "stream CL 0":
		req.ContentLength = 0
	case "wrong length":
		req.ContentLength += r.lengthLie
	}
	return req
}
