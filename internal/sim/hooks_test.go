package sim

// The simulation's hooks (OnRetry, OnGiveUp, PrepareRetry, Retryable),
// which record what the Transport tells them and may fail or panic, and
// the layer that records the attempts of the Transport under test.

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/retryhttp/retryhttp"
)

// simPanic is the value of a hook's planned panic.
type simPanic struct{ hook string }

// hookCalled counts a call of hook name, and panics if it is the call the
// seed planned a panic for.
func (s *sim) hookCalled(name string) {
	s.mu.Lock()
	s.hookCalls[name]++
	boom := name == s.cfg.panicHook && s.hookCalls[name] == s.cfg.panicAt
	s.mu.Unlock()
	if boom {
		s.count("hook panics: " + name)
		panic(simPanic{name})
	}
}

// simRetry is an OnRetry event and when it came.
type simRetry struct {
	retryhttp.RetryEvent
	at time.Time
}

// hook sets the hooks of tr that the configuration asks for.
func (s *sim) hook(tr *retryhttp.Transport) {
	if s.cfg.hooks {
		tr.OnRetry = func(e *retryhttp.RetryEvent) {
			r := s.callerOf(e.Request, "OnRetry")
			resuming := s.readingBody(r)
			s.mu.Lock()
			if resuming {
				r.resumeRetries = append(r.resumeRetries, simRetry{RetryEvent: *e, at: time.Now()})
			} else {
				r.retries = append(r.retries, simRetry{RetryEvent: *e, at: time.Now()})
			}
			s.mu.Unlock()
			s.hookCalled("OnRetry")
		}
		tr.OnGiveUp = func(e *retryhttp.GiveUpEvent) {
			r := s.callerOf(e.Request, "OnGiveUp")
			resuming := s.readingBody(r)
			s.mu.Lock()
			if resuming {
				r.resumeGiveUps = append(r.resumeGiveUps, *e)
			} else {
				r.giveUps = append(r.giveUps, *e)
			}
			s.mu.Unlock()
			s.hookCalled("OnGiveUp")
		}
	}
	if s.cfg.prepare || s.cfg.panicHook == "PrepareRetry" {
		tr.PrepareRetry = s.prepareRetry
	}
}

// callerOf returns the simulated request whose caller's request req must
// be, as hook says.
func (s *sim) callerOf(req *http.Request, hook string) *simReq {
	r := reqOf(req.Context())
	if req != r.req && !r.warm {
		s.failf(r, "%s was given a request that is not the caller's", hook)
	}
	return r
}

// prepareRetry changes the retry's copy (a header, the query), checks that
// the copy is its own, and fails one call in cfg.prepErr.
func (s *sim) prepareRetry(req *http.Request) error {
	n := retryhttp.AttemptNumber(req.Context())
	r := reqOf(req.Context())
	switch {
	case req == r.req:
		s.failf(r, "PrepareRetry was given the caller's request")
	case req.Header == nil:
		s.failf(r, "PrepareRetry was given a nil Header")
	case r.req.Header != nil && reflect.ValueOf(req.Header).Pointer() == reflect.ValueOf(r.req.Header).Pointer():
		s.failf(r, "PrepareRetry's copy shares the caller's Header")
	case req.URL == r.req.URL:
		s.failf(r, "PrepareRetry's copy shares the caller's URL")
	default:
		req.Header.Set("X-Sim-Retry", strconv.Itoa(n))
		req.URL.RawQuery = "retry=" + strconv.Itoa(n)
	}
	s.hookCalled("PrepareRetry")
	if s.cfg.prepErr > 0 && s.drawFor(r, n, 1).IntN(s.cfg.prepErr) == 0 {
		s.mu.Lock()
		r.prepFails++
		s.mu.Unlock()
		s.count("PrepareRetry fails")
		return errors.New("sim: PrepareRetry failed")
	}
	return nil
}

// retryable returns a Policy.Retryable: "keep" keeps the verdict, "again"
// retries a response marked X-Sim-Again, "refuse 502" never retries a 502,
// "peek" peeks at the body first.
func (s *sim) retryable(mode string) func(*retryhttp.Attempt) bool {
	return func(a *retryhttp.Attempt) bool {
		s.hookCalled("Retryable")
		if r := reqOf(a.Request.Context()); r != nil && !s.readingBody(r) {
			start := time.Now()
			s.mu.Lock()
			r.verdicts = append(r.verdicts, simVerdict{resp: a.Response, err: a.Err != nil})
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				r.judging += time.Since(start)
				s.mu.Unlock()
			}()
		}
		switch {
		case a.Response == nil:
		case mode == "again" && a.Response.Header.Get("X-Sim-Again") != "":
			return true
		case mode == "refuse 502" && a.Response.StatusCode == http.StatusBadGateway:
			return false
		case mode == "peek":
			a.Peek(16)
		}
		return a.Retry
	}
}

// ---- the attempts of the Transport under test ----

// simAttempt is an attempt of the Transport under test, as its base got it.
type simAttempt struct {
	n          int // AttemptNumber of its context
	host       string
	key        string // the idempotency key it carried (see wireKey), or ""
	start, end time.Time
	resp       *http.Response
	err        error
	done       bool
}

// simLayer is the base of the Transport under test (or of the Transport
// nested under it, which sends each of its attempts once): it records each
// attempt and passes it on, to next, or through sdk, a Transport reached
// with the attempt's context, as an SDK's client would be.
type simLayer struct {
	s    *sim
	next http.RoundTripper
	sdk  *retryhttp.Transport
}

func (l *simLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	s := l.s
	r := reqOf(req.Context())
	if r == nil {
		s.failf(nil, "an attempt without the caller's context: %s", req.URL)
		return l.next.RoundTrip(req)
	}
	a := &simAttempt{n: retryhttp.AttemptNumber(req.Context()), host: req.URL.Host, start: time.Now(),
		key: wireKey(req.Header, r.pol.keys)}
	s.mu.Lock()
	if req.Header.Get("Range") != "" { // (the callers ask for no range: the Transport resumes a body)
		r.resumeAttempts = append(r.resumeAttempts, a)
	} else {
		r.attempts = append(r.attempts, a)
	}
	s.mu.Unlock()
	var resp *http.Response
	var err error
	if l.sdk != nil {
		resp, err = l.sdk.RoundTrip(req.Clone(req.Context()))
	} else {
		resp, err = l.next.RoundTrip(req)
	}
	s.mu.Lock()
	a.end, a.resp, a.err, a.done = time.Now(), resp, err, true
	s.mu.Unlock()
	return resp, err
}
