package otelretry

import (
	"context"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxHosts is how many distinct server.address values the metrics
// take without WithMaxHosts.
const DefaultMaxHosts = 100

// The names of the metrics (see the package doc).
const (
	MetricAttempts           = "retryhttp.attempts"
	MetricRetries            = "retryhttp.retries"
	MetricHedges             = "retryhttp.hedges"
	MetricGiveUps            = "retryhttp.give_ups"
	MetricBudgetWaits        = "retryhttp.budget.waits"
	MetricBudgetDenials      = "retryhttp.budget.denials"
	MetricThrottleRejections = "retryhttp.throttle.rejections"
	MetricRetryDelay         = "retryhttp.retry.delay"
)

// delayBuckets are the bounds of the retry delay histogram, in seconds:
// from the millisecond waits of a fast backoff to Retry-After's 30 s limit
// (Policy.MaxRetryAfter's default) and beyond.
var delayBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// defaultMethods are the methods known without WithKnownMethods: those of
// RFC 9110 and PATCH, as the HTTP semantic conventions list them.
var defaultMethods = map[string]bool{
	http.MethodConnect: true, http.MethodDelete: true, http.MethodGet: true,
	http.MethodHead: true, http.MethodOptions: true, http.MethodPatch: true,
	http.MethodPost: true, http.MethodPut: true, http.MethodTrace: true,
}

// other stands for a value outside a bounded set, as in the semantic
// conventions.
const other = "_OTHER"

// instruments holds what one instrumented Transport records with.
type instruments struct {
	tracer trace.Tracer
	known  map[string]bool
	hosts  hostNames
	opts   options

	routes  sync.Map   // routeKey -> *route; at most maxRoutes
	routeMu sync.Mutex // held to add to routes
	nroutes int        // in routes; requires routeMu

	// The attempts by outcome, counted here for the attempts counter's
	// callback, with those of the other Transports of the same meter.
	counts *attemptCounts

	retries, hedges, giveUps, budgetWaits, budgetDenials, throttled metric.Int64Counter
	delay                                                           metric.Float64Histogram
}

func newInstruments(c *config) *instruments {
	in := &instruments{
		tracer: c.tp.Tracer(ScopeName),
		known:  c.known,
		hosts:  hostNames{max: c.maxHosts},
	}
	if in.known == nil {
		in.known = defaultMethods
	}
	m := c.mp.Meter(ScopeName)
	in.counts = attemptCountsOf(m)
	in.retries = counter(m, MetricRetries, "{retry}", "Attempts sent after a failed one; hedges are not retries.")
	in.hedges = counter(m, MetricHedges, "{attempt}", "Hedges sent: copies of an attempt that had not answered yet.")
	in.giveUps = counter(m, MetricGiveUps, "{request}", "Requests that ended with a failure, by reason.")
	in.budgetWaits = counter(m, MetricBudgetWaits, "{retry}", "Retries that waited for the retry budget, then went.")
	in.budgetDenials = counter(m, MetricBudgetDenials, "{request}", "Requests given up on because the retry budget let no retry go in time.")
	in.throttled = counter(m, MetricThrottleRejections, "{request}", "Requests that adaptive throttling rejected in the client.")
	h, err := m.Float64Histogram(MetricRetryDelay, metric.WithUnit("s"),
		metric.WithDescription("The wait before each retry, as the policy or the server set it."),
		metric.WithExplicitBucketBoundaries(delayBuckets...))
	if err != nil {
		otel.Handle(err)
		h = noop.Float64Histogram{}
	}
	in.delay = h
	return in
}

// counter returns m's counter, or one that records nothing if m cannot
// make it (the error goes to OpenTelemetry's error handler).
func counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
		return noop.Int64Counter{}
	}
	return c
}

// attempt records the outcome of an attempt, a retry if retry is set. r is
// its request's state, if the request came through the instrumented
// RoundTripper.
func (in *instruments) attempt(r *request, req *http.Request, retry bool, resp *http.Response, err error) {
	var rt *route
	if r != nil {
		rt = r.route
	} else {
		rt = in.routeOf(req)
	}
	if err == nil && resp != nil {
		rt.counts.classes[statusClassOf(resp)].Add(1)
	} else {
		rt.counts.failed(errorType(err)).Add(1)
	}
	if retry {
		in.retries.Add(req.Context(), 1, in.attrs(rt.labels, attribute.KeyValue{}))
	}
}

// attemptCounts are the counts behind retryhttp.attempts. An attempt adds
// one to an atomic count, and the counter's callback reports the counts
// when a reader collects: a synchronous counter's Add cost a request about
// a tenth of what otelhttp's instrumentation costs it (the attribute set's
// lookup, an exemplar), for the same sums.
//
// The Transports instrumented with one meter share its counts and one
// callback, as they share the instrument (the SDK makes one per meter and
// name), and the counts stay when a Transport goes: they are cumulative, as
// the SDK's own sums of a synchronous counter are. The callback, which the
// provider holds while it lives, holds the counts; nothing holds a
// Transport's instruments, nor the provider.
type attemptCounts struct {
	counts sync.Map // labels -> *outcomes
	opts   options
}

// shared finds a meter's counts again for its next Transport, without
// keeping the meter, and so its provider, alive: an entry is keyed by the
// meter's address and holds it weakly, and a cleanup removes it once the
// meter is gone. A meter that is no pointer (the no-op's, another API's)
// gets counts and a callback for each Transport, whose observations of one
// attribute set the SDK adds up.
var shared sync.Map // uintptr -> *sharedCounts

type sharedCounts struct {
	meter  weak.Pointer[byte]
	counts *attemptCounts
}

// attemptCountsOf returns the counts of m's attempts counter, making the
// counter and registering its callback once.
func attemptCountsOf(m metric.Meter) *attemptCounts {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return newAttemptCounts(m)
	}
	p := (*byte)(v.UnsafePointer())
	key := uintptr(unsafe.Pointer(p))
	if e, ok := shared.Load(key); ok && e.(*sharedCounts).meter.Value() == p {
		return e.(*sharedCounts).counts
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if e, ok := shared.Load(key); ok {
		if e := e.(*sharedCounts); e.meter.Value() == p {
			return e.counts
		}
		// A dead meter's entry, at an address reused before its cleanup
		// ran: replaced (the cleanup deletes its own entry alone).
	}
	e := &sharedCounts{meter: weak.Make(p), counts: newAttemptCounts(m)}
	shared.Store(key, e)
	runtime.AddCleanup(p, func(e *sharedCounts) { shared.CompareAndDelete(key, e) }, e)
	return e.counts
}

var sharedMu sync.Mutex // held to add to shared

// newAttemptCounts makes m's attempts counter and counts, and registers
// the callback that reports them.
func newAttemptCounts(m metric.Meter) *attemptCounts {
	c := new(attemptCounts)
	inst, err := m.Int64ObservableCounter(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent to the base transport, by outcome."))
	if err != nil {
		otel.Handle(err)
		return c
	}
	observe := func(_ context.Context, obs metric.Observer) error {
		c.observe(obs, inst)
		return nil
	}
	if _, err := m.RegisterCallback(observe, inst); err != nil {
		otel.Handle(err)
	}
	return c
}

// outcomes counts the attempts of one set of labels by outcome.
type outcomes struct {
	classes [len(statusClasses)]atomic.Int64 // answered, by status class
	errors  sync.Map                         // error.type -> *atomic.Int64; failed
}

// of returns the outcomes of the attempts with labels l.
func (c *attemptCounts) of(l labels) *outcomes {
	if o, ok := c.counts.Load(l); ok {
		return o.(*outcomes)
	}
	o, _ := c.counts.LoadOrStore(l, new(outcomes))
	return o.(*outcomes)
}

// failed returns the count of attempts that failed with error.type t.
func (o *outcomes) failed(t string) *atomic.Int64 {
	if n, ok := o.errors.Load(t); ok {
		return n.(*atomic.Int64)
	}
	n, _ := o.errors.LoadOrStore(t, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// observe reports the attempts counted so far to obs for inst, by labels
// and outcome, leaving out the outcomes no attempt has had.
func (c *attemptCounts) observe(obs metric.Observer, inst metric.Int64Observable) {
	c.counts.Range(func(k, v any) bool {
		l, o := k.(labels), v.(*outcomes)
		for i := range o.classes {
			if n := o.classes[i].Load(); n > 0 {
				obs.ObserveInt64(inst, n, c.opts.of(l, attribute.String(keyStatusClass, statusClasses[i])))
			}
		}
		o.errors.Range(func(t, n any) bool {
			obs.ObserveInt64(inst, n.(*atomic.Int64).Load(), c.opts.of(l, semconv.ErrorTypeKey.String(t.(string))))
			return true
		})
		return true
	})
}

var statusClasses = [...]string{other, "1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClassOf returns the index in statusClasses of resp's status class:
// 1 to 5 for 1xx to 5xx, 0 outside.
func statusClassOf(resp *http.Response) int {
	if resp == nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		return 0
	}
	return resp.StatusCode / 100
}

// labels are what every metric of a request is recorded with: its
// http.request.method and server.address, each within its bounds.
type labels struct{ method, host string }

// labelsOf returns the request's labels: r's, or req's when the request
// did not come through the instrumented RoundTripper.
func (in *instruments) labelsOf(r *request, req *http.Request) labels {
	if r != nil {
		return r.route.labels
	}
	return in.routeOf(req).labels
}

// maxRoutes bounds the routes an instruments keeps. A request on a route
// past them makes the route for itself: a few allocations more, the same
// spans and metrics.
const maxRoutes = 1000

// A route is what the requests of one method to one URL scheme and host
// share: their metrics' labels, their spans' name and start options, and
// the counts of their attempts (shared with the routes of the same labels).
// Routes are made once and kept, so that a request finds all of it with
// one lookup and allocates none of it.
type route struct {
	labels    labels
	spanName  string                  // "retryhttp GET"; "retryhttp HTTP" for "_OTHER"
	spanStart []trace.SpanStartOption // INTERNAL, and the start attributes
	counts    *outcomes               // of the attempts with these labels
}

// routeKey names a route: a request's method, its URL's scheme and host,
// as the request spells them.
type routeKey struct{ method, scheme, host string }

// routeOf returns req's route, kept or, past maxRoutes, made for it.
func (in *instruments) routeOf(req *http.Request) *route {
	k := routeKey{method: req.Method}
	if u := req.URL; u != nil {
		k.scheme, k.host = u.Scheme, u.Host
	}
	if rt, ok := in.routes.Load(k); ok {
		return rt.(*route)
	}
	in.routeMu.Lock()
	defer in.routeMu.Unlock()
	if rt, ok := in.routes.Load(k); ok {
		return rt.(*route)
	}
	rt := in.newRoute(req)
	if in.nroutes < maxRoutes {
		in.routes.Store(k, rt)
		in.nroutes++
	}
	return rt
}

// newRoute makes req's route.
func (in *instruments) newRoute(req *http.Request) *route {
	method, original := in.method(req.Method)
	host, port := hostPort(req)
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method))
	if original != "" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(original))
	}
	if host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
	}
	if port > 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	name := "retryhttp " + method
	if method == other {
		name = "retryhttp HTTP"
	}
	l := labels{method, in.hosts.name(host)}
	return &route{
		labels:    l,
		spanName:  name,
		spanStart: []trace.SpanStartOption{internalSpan, trace.WithAttributes(attrs...)},
		counts:    in.counts.of(l),
	}
}

// attrs returns the option that records a measurement with l and extra
// (unless extra's key is empty).
func (in *instruments) attrs(l labels, extra attribute.KeyValue) metric.MeasurementOption {
	return in.opts.of(l, extra)
}

// options are the options that record measurements with a set of labels
// and one attribute more, made once and kept: there are few, as the labels
// and the values of the attribute are bounded.
type options struct{ m sync.Map } // attrsKey -> metric.MeasurementOption

// of returns the option that records a measurement with l and extra
// (unless extra's key is empty).
func (o *options) of(l labels, extra attribute.KeyValue) metric.MeasurementOption {
	k := attrsKey{l, extra.Key, extra.Value.String()}
	if opt, ok := o.m.Load(k); ok {
		return opt.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(l.method), semconv.ServerAddress(l.host)}
	if extra.Key != "" {
		kvs = append(kvs, extra)
	}
	opt, _ := o.m.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return opt.(metric.MeasurementOption)
}

type attrsKey struct {
	labels
	key   attribute.Key
	value string
}

// method returns the http.request.method of a request's method, and the
// method itself when that is "_OTHER" (else "").
func (in *instruments) method(m string) (method, original string) {
	if m == "" {
		return http.MethodGet, "" // net/http's meaning
	}
	if in.known[m] {
		return m, ""
	}
	return other, m
}

// hostPort returns req's server.address (lower case) and server.port (the
// scheme's default when the URL has none; 0 if unknown).
func hostPort(req *http.Request) (string, int) {
	u := req.URL
	if u == nil {
		return "", 0
	}
	var port int
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	}
	if port == 0 {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	return strings.ToLower(u.Hostname()), port
}

// hostNames bounds the server.address values of the metrics: the first max
// hosts named keep their names, the others are "_OTHER". It holds at most
// max names.
type hostNames struct {
	max  int
	seen sync.Map // host -> struct{}; read without the lock
	mu   sync.Mutex
	n    int // names in seen; requires mu
}

// name returns the server.address to record for host.
func (h *hostNames) name(host string) string {
	if _, ok := h.seen.Load(host); ok {
		return host
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seen.Load(host); ok {
		return host
	}
	if h.n >= h.max {
		return other
	}
	h.seen.Store(host, struct{}{})
	h.n++
	return host
}
