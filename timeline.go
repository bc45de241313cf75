package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// What a request went through, attempt by attempt: each attempt's outcome,
// judged by Policy.Retryable, and when asked for (Policy.Timeline) its
// times and the wait before it, for the caller to read from what RoundTrip
// returned.

// An Attempt is one attempt of a request: its outcome, as shown to
// Policy.Retryable, and in a timeline (see Timeline) when it went, how long
// it took, and the wait before it.
type Attempt struct {
	Request  *http.Request  // the caller's request
	Number   int            // 1 for the first attempt
	Response *http.Response // nil when Err is set (in a timeline, see Err)
	Err      error          // nil when Response is set (in a timeline, see below)
	Retry    bool           // to Retryable, the default verdict; in a timeline, the verdict

	// In a timeline only. A failed attempt's Response has its header and
	// status, its body closed; the response returned is the caller's to
	// read. Err set beside a Response is the error its body broke with
	// (Policy.ResumeResponse). An attempt canceled when another answered
	// first, or as its request ended, has an error that says so.
	Start      time.Time     // when it was sent
	Duration   time.Duration // from Start until its outcome came back (judging it aside)
	Wait       time.Duration // the wait before it (see Source), BudgetWait included
	Source     string        // what set Wait: as RetryEvent.Source, or "HostWait"; "" if none
	BudgetWait time.Duration // the part of Wait spent in its host's line in the budget
	Hedge      bool          // sent while an earlier attempt had not answered
	Key        string        // the idempotency key it carried, "" if none
}

// defaultPeek is how much of a response body Attempt.Peek reads when asked
// for no particular length.
const defaultPeek = 64 << 10

// Peek returns the first bytes of the attempt's response body, up to n
// (n <= 0: 64 KiB), without consuming them: whoever reads the body
// next, the caller included, reads it from its start. It reads only when
// called, so a Retryable that never peeks costs nothing. A body shorter
// than n is returned whole; an error other than the body's end is
// returned with what was read. With no response, Peek returns nil, nil.
// Its read ends by the request's deadline: at it, the body is closed.
func (a *Attempt) Peek(n int) ([]byte, error) {
	if a.Response == nil || a.Response.Body == nil {
		return nil, nil
	}
	if n <= 0 {
		n = defaultPeek
	}
	ctx := context.Background()
	if a.Request != nil {
		ctx = a.Request.Context()
	}
	body := respbody.NewGuard(ctx, a.Response.Body) // a body deaf to contexts ends by the deadline too
	buf := make([]byte, n)
	m, err := io.ReadFull(body, buf)
	body.Stop()
	buf = buf[:m]
	a.Response.Body = &peekedBody{Reader: io.MultiReader(bytes.NewReader(buf), body), body: body}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = nil
	}
	return buf, err
}

// peekedBody gives back the bytes Peek read, then the rest of the body.
type peekedBody struct {
	io.Reader
	body io.ReadCloser
}

func (b *peekedBody) Close() error { return b.body.Close() }

// Timeline returns the attempts of the request that resp or err answers
// (what RoundTrip, or an http.Client, returned), in the order they were
// sent, when its policy recorded them (Policy.Timeline); nil otherwise. A
// response body that resumes after the call returned (ResumeResponse) adds
// its attempts as they go.
func Timeline(resp *http.Response, err error) []Attempt {
	var e *Error
	switch {
	case resp != nil:
		if m := mark.OfRequest(resp.Request); m != nil {
			if tl, ok := m.Timeline.(*timeline); ok {
				return slices.Clone(tl.list)
			}
		}
	case errors.As(err, &e) && e.timeline != nil:
		return slices.Clone(e.timeline.list)
	}
	return nil
}

// String describes the attempt on one line, for a log: its number, the wait
// before it and what set it, its duration, outcome and key.
func (a Attempt) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "attempt %d", a.Number)
	if a.Hedge {
		b.WriteString(" (hedge)")
	}
	if a.Wait > 0 {
		fmt.Fprintf(&b, " after %v of %s", a.Wait.Round(time.Millisecond), a.Source)
		if a.BudgetWait > 0 {
			fmt.Fprintf(&b, " (%v in the budget's line)", a.BudgetWait.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, ": %v", a.Duration.Round(time.Millisecond))
	if a.Response != nil {
		fmt.Fprintf(&b, ", %d", a.Response.StatusCode)
	}
	if a.Err != nil {
		fmt.Fprintf(&b, ", %v", a.Err)
	}
	if a.Key != "" {
		fmt.Fprintf(&b, ", key %s", a.Key)
	}
	return b.String()
}

// errAttemptCanceled is the outcome, in a timeline, of an attempt canceled
// before it came back: another answered first, or its request ended.
var errAttemptCanceled = errors.New("retryhttp: attempt canceled (another answered first, or its request ended)")

// pending is the Duration of an attempt in a timeline whose outcome has not
// come back yet.
const pending = time.Duration(-1)

// A timeline is the attempts of a request its policy records.
type timeline struct {
	list []Attempt
	next Attempt // the wait before the next attempt: Wait, Source, BudgetWait
}

// recordWait notes the wait before the next attempt, made of budget in the
// budget's line, from source.
func (c *call) recordWait(made, budget time.Duration, source string) {
	if c.tl != nil {
		c.tl.next = Attempt{Wait: made, Source: source, BudgetWait: budget}
	}
}

// recordSend enters attempt a, sent at start (zero: now), in the timeline.
func (c *call) recordSend(a *attempt, start time.Time, hedge bool) {
	tl := c.tl
	if tl == nil {
		return
	}
	if start.IsZero() {
		start = c.t.clock.Now()
	}
	e := tl.next
	e.Request, e.Number, e.Start, e.Duration, e.Hedge, e.Key = c.req, a.n, start, pending, hedge, c.key.sent()
	tl.list = append(tl.list, e)
	tl.next = Attempt{}
}

// record keeps what the caller may read of attempt a's outcome, judged
// retry, which came back at a.back: its error, for the *Error to unwrap,
// and its entry in the timeline, if recorded; for an attempt whose
// response came back earlier, the error its body broke with.
func (c *call) record(a *attempt, retry bool) {
	if a.err != nil {
		c.errs = append(c.errs, a.err)
	}
	if c.tl == nil {
		return
	}
	e := c.tl.entry(a.n)
	if e == nil {
		return
	}
	if e.Duration == pending {
		e.Duration = a.back.Sub(e.Start)
		e.Response, e.Err = a.resp, a.err
	} else if a.err != nil {
		e.Err = a.err
	}
	e.Retry = retry
}

// endTimeline completes the timeline as the call ends after attempt a, and
// gives it to resp, if any, through the mark on its request (Timeline).
func (c *call) endTimeline(a *attempt, resp *http.Response) {
	if c.tl == nil {
		return
	}
	c.tl.end(a, c.t.clock.Now())
	if resp == nil {
		return
	}
	m := mark.OfRequest(resp.Request)
	if m == nil { // sent as the caller's own request: it needs a mark
		ctx := mark.Ended(c.parent, a.n, 0)
		resp.Request, m = c.answeredRequest(ctx), mark.Of(ctx)
	}
	m.Timeline = c.tl
}

// end enters the outcomes of the attempts that had none as the request
// ended at now: a's error (the caller's context ended it before it was
// judged), and the others', canceled.
func (tl *timeline) end(a *attempt, now time.Time) {
	for i := range tl.list {
		e := &tl.list[i]
		if e.Duration != pending {
			continue
		}
		e.Duration = now.Sub(e.Start)
		if e.Number == a.n && a.err != nil { // (every outcome with a response is judged)
			e.Err, e.Duration = a.err, a.back.Sub(e.Start)
		} else {
			e.Err = errAttemptCanceled
		}
	}
}

// entry returns attempt n's entry, or nil.
func (tl *timeline) entry(n int) *Attempt {
	for i := len(tl.list) - 1; i >= 0; i-- {
		if tl.list[i].Number == n {
			return &tl.list[i]
		}
	}
	return nil
}
