package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Canned is an in-memory base transport for sequential benchmarks: it reads
// and closes the request body as a real transport would, and answers with
// statuses in turn from Script (200 when Script is empty), each answer a
// realistic one: of realisticOK for a 200, of realisticFailed for another
// status, in turn, which the caller (or the library, for a failed attempt)
// reads and closes. Canned counts those bodies (OK, Failed), so a path's check
// can tell that every answer 200 was read to its end and closed.
//
// Canned allocates nothing per answer, so that a benchmark through it
// measures what wraps it and the bare row stays the floor. Its header maps
// are made once per Canned (copies of the answers', the first time it
// answers) and handed out again with each answer of their kind, not cloned
// per answer: a clone of a six-field header (http.Header.Clone: 3
// allocations, 496 bytes and 0.5 to 1 µs with Go 1.26) would cost every
// row, bare included, the same, once per attempt, and drown what the
// libraries add, which is sometimes no allocation at all; a network
// transport pays about that for parsing the fields, and the loopback paths
// measure it through net/http itself. Every library
// gets the same Canned, so sharing is fair to all; but a library that
// wrote to an answer's header would change the answers after it, so
// expect fails a run after which any header differs from the original.
// Each answer's body is a reader of the Canned's own, reset per answer.
//
// The last cannedSlots answers are kept apart (a response value and a body
// each, reused in turn): a failed answer stays intact while the retry path
// asks for the next two, in case a library reads or closes it late.
// Libraries that replace a response's Body therefore cannot stack wrappers
// across calls.
//
// A Canned is not safe for simultaneous use.
type Canned struct {
	Script []int // statuses answered in turn, cyclically
	Calls  int   // attempts received

	// The bodies of the answers: those answered 200, and the others.
	OK, Failed BodyCounts

	ok, failed []answer // the realistic answers, headers of this Canned's own
	slots      [cannedSlots]cannedSlot
}

// cannedSlots is how many answers a Canned keeps apart: more than the
// attempts of any path's request.
const cannedSlots = 4

type cannedSlot struct {
	resp http.Response
	body body
}

// RoundTrip answers req with the next status of the script.
func (c *Canned) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	status := http.StatusOK
	if len(c.Script) > 0 {
		status = c.Script[c.Calls%len(c.Script)]
	}
	s := &c.slots[c.Calls%cannedSlots]
	c.Calls++
	if c.ok == nil {
		c.ok, c.failed = cloneAnswers(realisticOK), cloneAnswers(realisticFailed)
	}
	counts, answers := &c.OK, c.ok
	if status != http.StatusOK {
		counts, answers = &c.Failed, c.failed
	}
	a := &answers[counts.Answered%len(answers)]
	counts.Answered++
	s.body = body{b: a.body, counts: counts}
	a.fill(&s.resp, status, req, &s.body)
	return &s.resp, nil
}

// expect returns a check that the base received attempts attempts per
// operation, that each operation's answer 200 was read to its end and
// closed, and that no header was written to.
func (c *Canned) expect(attempts int) func(ops int) error {
	return func(ops int) error {
		var errs []error
		if c.Calls != attempts*ops {
			errs = append(errs, fmt.Errorf("%d attempts for %d requests, want %d each", c.Calls, ops, attempts))
		}
		if c.OK.Answered != ops || c.OK.Drained != ops || c.OK.Closed != ops {
			errs = append(errs, fmt.Errorf("of %d answers 200 for %d requests, %d read to their end and %d closed; want one each, read and closed",
				c.OK.Answered, ops, c.OK.Drained, c.OK.Closed))
		}
		return errors.Join(append(errs, c.intact())...)
	}
}

// intact returns an error if a realistic answer's header was changed.
func (c *Canned) intact() error {
	for _, l := range []struct{ got, want []answer }{{c.ok, realisticOK}, {c.failed, realisticFailed}} {
		for i := range l.got {
			if !sameFields(l.got[i].header, l.want[i].header) {
				return fmt.Errorf("an answer's header was written to: %v, want %v", l.got[i].header, l.want[i].header)
			}
		}
	}
	return nil
}
