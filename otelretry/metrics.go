package otelretry

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/retryhttp/retryhttp"
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
	names  map[string]string // span names of the known methods
	hosts  hostNames
	opts   sync.Map // attrsKey -> metric.MeasurementOption; as bounded as the labels and values

	attempts, retries, giveUps, budgetWaits, budgetDenials, throttled metric.Int64Counter
	delay                                                             metric.Float64Histogram
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
	in.names = make(map[string]string, len(in.known))
	for m := range in.known {
		in.names[m] = "retryhttp " + m
	}
	m := c.mp.Meter(ScopeName)
	in.attempts = counter(m, MetricAttempts, "{attempt}", "Attempts sent to the base transport, by outcome.")
	in.retries = counter(m, MetricRetries, "{retry}", "Attempts sent after the first.")
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

// attempt records an attempt's outcome. r is its request's state, if the
// request came through the instrumented RoundTripper.
func (in *instruments) attempt(ctx context.Context, r *request, req *http.Request, resp *http.Response, err error) {
	l := in.labelsOf(r, req)
	outcome := attribute.String(keyStatusClass, statusClass(resp))
	if err != nil || resp == nil {
		outcome = semconv.ErrorTypeKey.String(errorType(err))
	}
	in.attempts.Add(ctx, 1, in.attrs(l, outcome))
	if retryhttp.AttemptNumber(ctx) > 1 {
		in.retries.Add(ctx, 1, in.attrs(l, attribute.KeyValue{}))
	}
}

var statusClasses = [...]string{1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}

// statusClass returns "1xx" .. "5xx" for resp's status, "_OTHER" outside.
func statusClass(resp *http.Response) string {
	if resp == nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		return other
	}
	return statusClasses[resp.StatusCode/100]
}

// labels are what every metric of a request is recorded with: its
// http.request.method and server.address, each within its bounds.
type labels struct{ method, host string }

// labelsOf returns the request's labels: r's, or req's when the request
// did not come through the instrumented RoundTripper.
func (in *instruments) labelsOf(r *request, req *http.Request) labels {
	if r != nil {
		return r.labels
	}
	method, _ := in.method(req.Method)
	host, _ := hostPort(req)
	return labels{method, in.hosts.name(host)}
}

// attrs returns the option that records a measurement with l and extra
// (unless extra's key is empty). The options are made once and kept: there
// are few, as the labels and the values of extra are bounded.
func (in *instruments) attrs(l labels, extra attribute.KeyValue) metric.MeasurementOption {
	k := attrsKey{l, extra.Key, extra.Value.String()}
	if o, ok := in.opts.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(l.method), semconv.ServerAddress(l.host)}
	if extra.Key != "" {
		kvs = append(kvs, extra)
	}
	o, _ := in.opts.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return o.(metric.MeasurementOption)
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
