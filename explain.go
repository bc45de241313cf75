package retryhttp

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Explain returns, as a table, the policy that req would be sent with:
// each setting's value once Policy, the matching entry of Hosts and the
// context's WithPolicy layers are applied, and the
// layer it comes from ("default" when none sets it). It sends nothing. A
// request made only for it, such as
//
//	req, _ := http.NewRequest("POST", "https://api.example.com/", nil)
//
// shows what a host's requests get; one with the caller's context shows
// that request's. The output is meant for people (a log line, a debugging
// session); its form may change.
func (t *Transport) Explain(req *http.Request) string {
	t.init()
	ls := []policyLayer{{"Transport.Policy", t.Policy}}
	if req.URL != nil && !t.hosts.Empty() {
		if hp, ok := t.hosts.Lookup(req.URL.Scheme, req.URL.Hostname(), req.URL.Port()); ok {
			ls = append(ls, policyLayer{fmt.Sprintf("Hosts[%q]", hp.hostKey), t.Hosts[hp.hostKey]})
		}
	}
	if o, ok := req.Context().Value(overrideKey{}).(*override); ok {
		ls = append(ls, o.layers()...)
	}
	eff := ls[0].p
	for _, l := range ls[1:] {
		eff = l.p.over(eff)
	}
	declared := declaredIdempotent(req.Header)

	var b strings.Builder
	target := "a request without a URL"
	if req.URL != nil {
		target = logURL(req.URL) // as the Logger writes it: no userinfo, no query values
	}
	fmt.Fprintf(&b, "%s %s\n", req.Method, target)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "setting\tvalue\tfrom")
	for _, s := range policySettings {
		from := "default"
		if s.name == "Idempotent" {
			// A declaration holds from the layer that makes it up.
			for _, l := range ls {
				if l.p.Idempotent {
					from = l.name
					break
				}
			}
		} else {
			for i := len(ls) - 1; i >= 0; i-- {
				if s.set(&ls[i].p) {
					from = ls[i].name
					break
				}
			}
		}
		value := s.show(&eff)
		if s.name == "Idempotent" && !eff.Idempotent && declared {
			value, from = "yes", "the request (a key field with a nil value)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.name, value, from)
	}
	fmt.Fprintf(tw, "Budget\t%s\t%s\n", t.budgetSummary(), map[bool]string{true: "default", false: "Transport.Budget"}[t.Budget == nil])
	tw.Flush()
	return b.String()
}

// A policyLayer is one of the policies a request's is layered from, and
// where it is set.
type policyLayer struct {
	name string
	p    Policy
}

// layers returns the overrides from the first set on the context to o,
// named as set.
func (o *override) layers() []policyLayer {
	var ls []policyLayer
	if o.under != nil {
		ls = o.under.layers()
	}
	name := "WithPolicy"
	if n := len(ls); n > 0 {
		name += " (inner " + strconv.Itoa(n) + ")"
	}
	return append(ls, policyLayer{name, o.p})
}

// budgetSummary describes the Transport's budget.
func (t *Transport) budgetSummary() string {
	if t.accounts == nil {
		return "none (every retry allowed)"
	}
	ratio, credit := t.accounts.Params()
	return fmt.Sprintf("%d retries held, %g earned per success", credit, ratio)
}

// A policySetting is a field of Policy as Explain shows it: whether a
// layer sets it (else the layer beneath decides, as Policy.over has it),
// and its effective value in words.
type policySetting struct {
	name string
	set  func(*Policy) bool
	show func(*Policy) string
}

var policySettings = []policySetting{
	{"MaxAttempts", func(p *Policy) bool { return p.MaxAttempts != 0 }, func(p *Policy) string {
		n := p.MaxAttempts
		if n == 0 {
			n = defaultMaxAttempts
		}
		if n <= 1 {
			return "1 (no retries)"
		}
		return strconv.Itoa(n)
	}},
	{"Backoff", func(p *Policy) bool { return p.Backoff != nil }, func(p *Policy) string {
		if p.Backoff == nil {
			return showBackoff(FullJitter{})
		}
		return showBackoff(p.Backoff)
	}},
	{"Statuses", func(p *Policy) bool { return p.Statuses != nil }, func(p *Policy) string {
		s := p.Statuses
		if s == nil {
			s = DefaultStatuses()
		}
		if len(s) == 0 {
			return "off (no status retried)"
		}
		return strings.Trim(fmt.Sprint(s), "[]")
	}},
	{"Retryable", func(p *Policy) bool { return p.Retryable != nil }, func(p *Policy) string {
		return map[bool]string{true: "a func of the caller's", false: "none (the default verdict)"}[p.Retryable != nil]
	}},
	{"AttemptTimeout", func(p *Policy) bool { return p.AttemptTimeout != 0 }, func(p *Policy) string {
		return offOr(p.AttemptTimeout <= 0, "off (the caller's deadline only)", p.AttemptTimeout)
	}},
	{"MaxRetryAfter", func(p *Policy) bool { return p.MaxRetryAfter > 0 }, func(p *Policy) string {
		return cmp.Or(max(p.MaxRetryAfter, 0), defaultMaxRetryAfter).String() // 0 or less: the default
	}},
	{"HostWait", func(p *Policy) bool { return p.HostWait != 0 }, func(p *Policy) string {
		return offOr(p.HostWait <= 0, "off", "up to "+p.HostWait.String())
	}},
	{"MaxBufferedBody", func(p *Policy) bool { return p.MaxBufferedBody != 0 }, func(p *Policy) string {
		n := cmp.Or(p.MaxBufferedBody, defaultMaxBufferedBody)
		return offOr(n < 0, "off (never buffer)", showBytes(n))
	}},
	{"BufferResponse", func(p *Policy) bool { return p.BufferResponse != 0 }, func(p *Policy) string {
		return offOr(p.BufferResponse <= 0, "off", "up to "+showBytes(p.BufferResponse))
	}},
	{"IdempotencyKeys", func(p *Policy) bool { return p.IdempotencyKeys != nil }, func(p *Policy) string {
		k := p.IdempotencyKeys.compile()
		if k == nil {
			return "off"
		}
		return fmt.Sprintf("%s on %s", k.header, strings.Join(k.methods, ", "))
	}},
	{"Idempotent", func(p *Policy) bool { return p.Idempotent }, func(p *Policy) string {
		return map[bool]string{true: "yes", false: "not declared"}[p.Idempotent]
	}},
	{"Throttle", func(p *Policy) bool { return p.Throttle != nil }, func(p *Policy) string {
		c := p.Throttle.compile()
		if c == nil {
			return "off"
		}
		return fmt.Sprintf("K %g, window %v", c.K(), c.Window())
	}},
	{"Hedge", func(p *Policy) bool { return p.Hedge != nil }, func(p *Policy) string {
		h := p.Hedge.compile()
		if h == nil {
			return "off"
		}
		delay := fmt.Sprintf("p%g latency (%v to %v)", h.Quantile*100, h.Min, h.Max)
		if h.Fixed > 0 {
			delay = h.Fixed.String()
		}
		return fmt.Sprintf("%d after %s; %g%% of requests at most", h.MaxHedges, delay, h.Fraction*100)
	}},
	{"ResumeResponse", func(p *Policy) bool { return p.ResumeResponse }, func(p *Policy) string {
		return map[bool]string{true: "on", false: "off"}[p.ResumeResponse]
	}},
	{"Timeline", func(p *Policy) bool { return p.Timeline }, func(p *Policy) string {
		return map[bool]string{true: "recorded", false: "off"}[p.Timeline]
	}},
}

// offOr returns off if isOff, else v in words.
func offOr(isOff bool, off string, v any) string {
	if isOff {
		return off
	}
	return fmt.Sprint(v)
}

// showBytes writes n bytes in KiB or MiB where they divide it.
func showBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// showBackoff writes a Backoff in words: the strategy and its bounds.
func showBackoff(b Backoff) string {
	show := func(name string, base, cap time.Duration) string {
		base, cap = bounds(base, cap)
		return fmt.Sprintf("%s, %v to %v", name, base, cap)
	}
	switch b := b.(type) {
	case Constant:
		return "constant " + time.Duration(b).String()
	case FullJitter:
		return show("full jitter", b.Base, b.Cap)
	case EqualJitter:
		return show("equal jitter", b.Base, b.Cap)
	case DecorrelatedJitter:
		return show("decorrelated jitter", b.Base, b.Cap)
	}
	return fmt.Sprintf("%T of the caller's", b)
}
