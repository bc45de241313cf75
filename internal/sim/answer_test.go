package sim

// The simulation server's answers: statuses, the waits they ask for (valid,
// malformed, huge), and response bodies whole, cut or stalled.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/header"
)

// simHint is the wait a response asks for, as the simulation wrote it.
type simHint struct {
	name   string        // for the trace
	valid  bool          // a wait the Transport is to honour (0: none)
	wait   time.Duration // the wait asked for, unless a date
	date   time.Time     // the instant asked for, if a date
	source string
}

// waitAt returns the wait the hint asks for, read at now.
func (h simHint) waitAt(now time.Time) time.Duration {
	if !h.date.IsZero() {
		return max(h.date.Sub(now), 0)
	}
	return h.wait
}

// answer makes attempt c's response.
func (s *sim) answer(rng *rand.Rand, req *http.Request, r *simReq, c *simCall) *http.Response {
	h := http.Header{}
	c.status = drawStatus(rng, c.fault)
	if s.cfg.flaky {
		// A healthy, flaky host: a plain 502, then the answer.
		c.status = map[bool]int{true: http.StatusBadGateway, false: http.StatusOK}[c.fault == faultStatus]
		resp := &http.Response{Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)),
			StatusCode: c.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req}
		s.respBody(rng, req, r, c, resp)
		return resp
	}
	if s.cfg.conflicts && c.status >= 400 &&
		rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|uint64(c.n)<<8|uint64(c.dup)|1<<63)).IntN(3) == 0 {
		c.status = http.StatusConflict // a third of the failures, for the seeds that test keys' 409s
	}
	c.status = s.raceStatus(r, c)
	if c.fault == faultStatus || rng.IntN(10) == 0 {
		c.hint = drawHint(rng, h, time.Now())
		s.count("hint: " + c.hint.name)
	}
	if race := s.raceRand(r, c, 2); s.cfg.racing && c.fault == faultStatus && race.IntN(2) == 0 {
		// Half a race's failures ask for a wait.
		for !c.hint.valid {
			h = http.Header{}
			c.hint = drawHint(race, h, time.Now())
		}
		s.count("hint in a race")
	}
	h, c.hint = s.moreWaits(r, c, h)
	h = s.limitedAnswer(r, c, h)
	if c.fault == faultStatus && rng.IntN(8) == 0 {
		v := pick(rng, "false", "true", "maybe", "FALSE")
		h.Set("X-Should-Retry", v)
		c.noRetry = strings.EqualFold(v, "false")
		s.count("X-Should-Retry: " + v)
	}
	if c.fault == faultNone && c.n <= 30 && rng.IntN(6) == 0 {
		h.Set("X-Sim-Again", "1") // Retryable's "again" asks for another attempt
	}
	resp := &http.Response{
		Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)), StatusCode: c.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
	}
	if rng.IntN(10) == 0 {
		resp.Request = nil
	}
	s.respBody(rng, req, r, c, resp)
	s.resumableAnswer(req, r, c, resp)
	return resp
}

func drawStatus(rng *rand.Rand, f faultKind) int {
	if f == faultNone {
		return pick(rng, 200, 200, 200, 200, 201, 204)
	}
	return pick(rng, 503, 503, 503, 503, 503, 500, 500, 502, 502, 504, 504, 429, 429, 429, 429,
		408, 409, 409, 400, 422, 404, 501, 403)
}

// drawHint writes into h the wait a response asks for, if any, at now.
func drawHint(rng *rand.Rand, h http.Header, now time.Time) simHint {
	switch rng.IntN(12) {
	case 4, 5:
		v := pick(rng, "0", "1", "2", "3", "10", "30", "31", "100", "86400", "99999999999999999999")
		h.Set("Retry-After", v)
		n, _ := strconv.ParseInt(v, 10, 64)
		if len(v) > 15 {
			n = 1 << 62
		}
		return simHint{name: "Retry-After seconds", valid: true, wait: header.SecondsSaturated(n),
			source: "Retry-After"}
	case 6:
		date := now.Add(pick(rng, -10*time.Second, 0, 2*time.Second, 10*time.Second, 40*time.Second, time.Hour))
		date = date.UTC().Truncate(time.Second)
		h.Set("Retry-After", date.Format(http.TimeFormat))
		return simHint{name: "Retry-After date", valid: true, date: date, source: "Retry-After"}
	case 7:
		h.Set("Retry-After", pick(rng, "soon", "-1", "1.5", " ", "+3", "Wed, 99 Foo 2020 00:00:00 GMT", "1 2"))
		return simHint{name: "Retry-After malformed"}
	case 8:
		ms := []struct {
			v    string
			wait time.Duration
		}{{"1500", 1500 * time.Millisecond}, {"20.5", 20500 * time.Microsecond}, {"0", 0}, {"abc", -1}, {"1e3", -1}}
		m := ms[rng.IntN(len(ms))]
		h.Set("Retry-After-Ms", m.v)
		return simHint{name: "Retry-After-Ms", valid: m.wait >= 0, wait: m.wait, source: "Retry-After"}
	case 9:
		rl := []struct {
			v    string
			wait time.Duration
		}{{`"default";r=0;t=3`, 3 * time.Second}, {`"default";r=2;t=5`, -1}, {`"default";r=0;t=5,`, -1},
			{`"a";r=0;t=3, "b";r=0;t=8`, 8 * time.Second}, {`"d";t=2`, 2 * time.Second}}
		q := rl[rng.IntN(len(rl))]
		h.Set("RateLimit", q.v)
		return simHint{name: "RateLimit", valid: q.wait >= 0, wait: q.wait, source: "RateLimit"}
	case 10:
		h.Set("X-RateLimit-Remaining", "0")
		if rng.IntN(2) == 0 {
			h.Set("X-RateLimit-Reset", "4")
			return simHint{name: "X-RateLimit-Reset", valid: true, wait: 4 * time.Second,
				source: "RateLimit"}
		}
		date := now.Add(6 * time.Second).Truncate(time.Second)
		h.Set("X-RateLimit-Reset", strconv.FormatInt(date.Unix(), 10))
		return simHint{name: "X-RateLimit-Reset date", valid: true, date: date, source: "RateLimit"}
	}
	return simHint{name: "none"}
}

// respBody gives resp a body: whole, cut short, stalled, slow, empty or
// nil, of a known length or not.
func (s *sim) respBody(rng *rand.Rand, req *http.Request, r *simReq, c *simCall, resp *http.Response) {
	kind := rng.IntN(20)
	if c.n > 30 && kind >= 12 && kind < 17 {
		kind = 0 // the server has recovered (see drawFault): no body cut or stalled
	}
	if req.Method == http.MethodHead || c.status == http.StatusNoContent || kind >= 17 {
		// (No content for a HEAD or a 204, as a real transport gives them.)
		if kind == 18 {
			s.count("response body nil")
			return // resp.Body nil: http.Client tolerates it
		}
		resp.Body = http.NoBody
		return
	}
	content := fmt.Appendf(nil, "seed %d request %d attempt %d.%d status %d:", s.seed, r.id, c.n, c.dup, c.status)
	size := pick(rng, 0, rng.IntN(200), rng.IntN(5000), 70000)
	for i := range size {
		content = append(content, 'a'+byte(i%26))
	}
	b := &simRespBody{content: content, ctx: req.Context(), cutAt: -1, stallAt: -1, closed: make(chan struct{}),
		answered: time.Now()}
	switch {
	case kind >= 12 && kind < 14:
		b.cutAt = rng.IntN(len(content))
		s.count("response body cut")
	case kind >= 14 && kind < 17:
		b.stallAt = rng.IntN(len(content))
		b.stall = pick(rng, 100*time.Millisecond, 2*time.Second, 30*time.Second, 200*time.Second)
		b.cutAfterStall = kind == 14
		s.count("response body stalled")
		// A third of them deaf to every context, as a base's own body may
		// be: only the stall's end or a Close ends it (a stream of its own,
		// so that the other draws stay as they were).
		if rand.New(rand.NewPCG(s.seed, uint64(r.id)<<32|uint64(c.n)<<8|uint64(c.dup))).IntN(3) == 0 {
			b.deaf = true
			s.mu.Lock()
			r.deaf = true
			s.mu.Unlock()
			s.count("response body stalled, deaf to contexts")
		}
	}
	if race := s.raceRand(r, c, 3); s.cfg.racing && c.status >= 400 && b.stallAt < 0 && race.IntN(3) == 0 {
		// A third of a race's failures stall deaf to every context: a
		// losing answer's drain must be cut off by the deadline.
		b.stallAt, b.stall, b.deaf = race.IntN(len(content)), pick(race, 2*time.Second, 200*time.Second), true
		s.mu.Lock()
		r.deaf = true
		s.mu.Unlock()
		s.count("response body stalled in a race, deaf to contexts")
	}
	s.slowFailure(r, c, b)
	resp.ContentLength = int64(len(content))
	if rng.IntN(4) == 0 {
		resp.ContentLength = -1
	}
	resp.Body, c.body, c.content = b, b, content
}

// simRespBody is a response body of the server. It records its closes;
// a read after a close fails with errSimClosed.
type simRespBody struct {
	content       []byte
	ctx           context.Context // the attempt's: its end ends a stalled read
	cutAt         int             // the body breaks after so many bytes (-1: never)
	stallAt       int             // the body stalls once after so many bytes (-1: never)
	stall         time.Duration
	cutAfterStall bool // after the stall, the body breaks
	deaf          bool // the stall ignores the attempt's context
	answered      time.Time
	cutErr        error     // what the cut returns (nil: io.ErrUnexpectedEOF)
	withData      bool      // the cut comes with the last bytes before it, in one Read
	onCut         func(int) // told of the bytes a cut gave with its error

	mu       sync.Mutex
	off      int
	stalled  bool
	err      error // a failed read's, for the reads after it
	closes   atomic.Int32
	once     sync.Once
	closed   chan struct{}
	closedAt atomic.Int64 // the first Close's time, in Unix nanoseconds
}

var errSimClosed = errors.New("sim: read on a closed response body")

func (b *simRespBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return 0, errSimClosed
	default:
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.stallAt >= 0 && !b.stalled && b.off >= b.stallAt {
		b.stalled = true
		b.mu.Unlock()
		err := b.wait()
		b.mu.Lock()
		if err != nil {
			b.err = err
			return 0, err
		}
		if b.cutAfterStall {
			b.cutAt = b.off
		}
	}
	end := len(b.content)
	if b.stallAt >= 0 && !b.stalled {
		end = min(end, b.stallAt)
	}
	if b.cutAt >= 0 && b.off >= b.cutAt {
		b.err = cmp.Or(b.cutErr, io.ErrUnexpectedEOF)
		return 0, b.err
	}
	if b.cutAt >= 0 {
		end = min(end, b.cutAt)
	}
	n, err := readTo(p, b.content, &b.off, end)
	if b.withData && n > 0 && b.off == b.cutAt {
		b.err = cmp.Or(b.cutErr, io.ErrUnexpectedEOF)
		if b.onCut != nil {
			b.onCut(n)
		}
		return n, b.err
	}
	return n, err
}

// readTo reads into p what of data lies between *off and end, moves *off
// past it, and says io.EOF once *off is at the end of data.
func readTo(p, data []byte, off *int, end int) (int, error) {
	n := copy(p, data[*off:end])
	*off += n
	if *off == len(data) {
		return n, io.EOF
	}
	return n, nil
}

// wait is the stall: until it is over (nil), the attempt's context ends, or
// the body is closed.
func (b *simRespBody) wait() error {
	t := time.NewTimer(b.stall)
	defer t.Stop()
	ctxDone := b.ctx.Done()
	if b.deaf {
		ctxDone = nil
	}
	select {
	case <-t.C:
		return nil
	case <-ctxDone:
		return canceled(b.ctx)
	case <-b.closed:
		return errSimClosed
	}
}

func (b *simRespBody) Close() error {
	b.closes.Add(1)
	b.once.Do(func() {
		b.closedAt.Store(time.Now().UnixNano())
		close(b.closed)
	})
	return nil
}

// pick returns one of choices, drawn from rng.
func pick[T any](rng *rand.Rand, choices ...T) T { return choices[rng.IntN(len(choices))] }
