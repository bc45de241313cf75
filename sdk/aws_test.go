package sdk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// The AWS SDK for Go v2 over retryhttp, against a fake S3 and DynamoDB on
// loopback (TLS, as the real services: the SDK signs and streams bodies
// differently over plain HTTP).
//
// What the SDK sends, as seen on the wire (aws-sdk-go-v2 v1.48.0, s3
// v1.114.10, dynamodb v1.74.0):
//   - every attempt carries "Amz-Sdk-Request: attempt=N; max=M" (M is 3 for
//     S3 and 4 for DynamoDB by default) and "Amz-Sdk-Invocation-Id: <UUID>",
//     one UUID for all the attempts of a call;
//   - each attempt is a new *http.Request whose Body has no GetBody, even
//     when the caller's body is a seekable bytes.Reader: the SDK rewinds the
//     reader itself between its attempts;
//   - PutObject with a seekable body sends Content-Length and
//     "X-Amz-Content-Sha256: UNSIGNED-PAYLOAD" over TLS; with a body that
//     cannot seek, it sends Transfer-Encoding: chunked with
//     "Expect: 100-continue", and cannot retry (it fails to rewind);
//   - PutItem is a POST of JSON (application/x-amz-json-1.0,
//     X-Amz-Target: DynamoDB_20120810.PutItem) with no idempotency key.

// awsCalls is how many calls each row makes, awsParallel how many at once
// under a transient fault; under a persistent one they all go at once
// (see awsDeadline).
const (
	awsCalls    = 20
	awsParallel = 4
)

// awsDeadline is each call's deadline. Once the service fails, retryhttp's
// default budget holds its retries in the host's line until news of the
// host (a success, or a probe's answer), and at the latest until a tenth
// of the time left before the deadline, 1 s at most: a call then returns
// its last failure, and the SDK's own tries that follow have that second.
// Against a service down for good every call over retryhttp runs to the
// line's end, 9 s: its calls go at once, or they would wait 9 s a batch.
const awsDeadline = 10 * time.Second

// awsFault says how the fake service answers the attempts of one call.
type awsFault struct {
	name   string
	times  int    // attempts (by the server's count, per call) that meet the fault, then success; -1: all
	status int    // the error's status, 0 for none
	code   string // the error code in the S3 XML or DynamoDB JSON answer
	reset  bool   // read (and apply) the request, then reset the connection
}

func (f awsFault) hits(n int) bool { return f.times < 0 || n <= f.times }

// down reports whether the fault is persistent: every attempt meets it.
func (f awsFault) down() bool { return f.times < 0 }

// parallel returns how many calls of a row go at once under the fault.
func (f awsFault) parallel() int {
	if f.down() {
		return awsCalls
	}
	return awsParallel
}

var (
	awsSlowDown     = awsFault{name: "503 SlowDown x2", times: 2, status: 503, code: "SlowDown"}
	awsS3Reset      = awsFault{name: "reset after request x1", times: 1, reset: true}
	awsS3Down       = awsFault{name: "503 SlowDown always", times: -1, status: 503, code: "SlowDown"}
	awsDDB503       = awsFault{name: "503 ServiceUnavailable x2", times: 2, status: 503, code: "ServiceUnavailable"}
	awsDDBThrottled = awsFault{name: "400 ThrottlingException x2", times: 2, status: 400, code: "ThrottlingException"}
	awsDDBReset     = awsFault{name: "reset after request x1", times: 1, reset: true}
	awsDDBDown      = awsFault{name: "503 ServiceUnavailable always", times: -1, status: 503, code: "ServiceUnavailable"}
)

// awsCallLedger is what the fake service saw of one call.
type awsCallLedger struct {
	attempts    int             // requests received
	applied     int             // writes applied (whole body, hash as sent)
	badBodies   int             // bodies received whole but unlike what the caller sent
	invocations map[string]bool // Amz-Sdk-Invocation-Id values
	sdkAttempts map[int]bool    // attempt numbers in Amz-Sdk-Request
	sdkHeaders  map[string]bool // Amz-Sdk-Request values
	want        []byte          // what the caller sends (PutObject, PutItem) or reads (GetObject)
}

// awsService plays S3 (path-style, /bucket/key) and DynamoDB (JSON 1.0,
// X-Amz-Target) on one TLS loopback server, with one fault.
type awsService struct {
	fault awsFault
	srv   *httptest.Server

	mu    sync.Mutex
	calls map[string]*awsCallLedger
	cut   int // attempts whose body ended before its end (never applied)
}

func newAWSService(t *testing.T, fault awsFault) *awsService {
	s := &awsService{fault: fault, calls: map[string]*awsCallLedger{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Connections a reset or the end of a row cut off mid-handshake are expected.
	s.srv.Config.ErrorLog = testutil.DiscardLog()
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// expect registers call id and the bytes its caller sends or reads.
func (s *awsService) expect(id string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[id] = &awsCallLedger{
		invocations: map[string]bool{},
		sdkAttempts: map[int]bool{},
		sdkHeaders:  map[string]bool{},
		want:        data,
	}
}

func (s *awsService) ledger(id string) awsCallLedger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.calls[id]
}

// cutBody counts an attempt whose body ended early.
func (s *awsService) cutBody() {
	s.mu.Lock()
	s.cut++
	s.mu.Unlock()
}

func (s *awsService) serve(w http.ResponseWriter, r *http.Request) {
	ddb := r.Header.Get("X-Amz-Target") != ""
	var id string
	var body []byte
	if ddb {
		// The call is named inside the body: read it first.
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			s.cutBody()
			return
		}
		id = awsItemID(body)
	} else {
		_, id, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	}

	s.mu.Lock()
	c := s.calls[id]
	if c == nil {
		s.mu.Unlock()
		http.Error(w, "unknown call "+id, http.StatusNotFound)
		return
	}
	c.attempts++
	n := c.attempts
	c.invocations[r.Header.Get("Amz-Sdk-Invocation-Id")] = true
	h := r.Header.Get("Amz-Sdk-Request")
	c.sdkHeaders[h] = true
	c.sdkAttempts[awsSDKAttempt(h)] = true
	want := c.want
	s.mu.Unlock()

	hit := s.fault.hits(n)
	if hit && s.fault.status != 0 && r.Header.Get("Expect") == "100-continue" {
		// The service answers before the body, which the client then never sends.
		s.writeError(w, ddb)
		return
	}
	write := r.Method == http.MethodPut || ddb
	if write && !ddb {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			s.cutBody() // nothing to apply
			return
		}
	}
	if write {
		ok := bytes.Equal(body, want)
		if ddb {
			ok = awsItemPayloadIs(body, want)
		}
		if !ok {
			s.mu.Lock()
			c.badBodies++
			s.mu.Unlock()
			http.Error(w, "body differs from the caller's", http.StatusBadRequest)
			return
		}
	}
	if hit && s.fault.status != 0 {
		s.writeError(w, ddb)
		return
	}
	if write {
		s.mu.Lock()
		c.applied++
		s.mu.Unlock()
	}
	if hit && s.fault.reset {
		testutil.ResetConn(w)
		return
	}
	switch {
	case ddb:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, "{}")
	case r.Method == http.MethodPut:
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, sha256.Sum256(body)))
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(want)))
		w.Write(want)
	}
}

// writeError answers with the fault's error in the service's format.
func (s *awsService) writeError(w http.ResponseWriter, ddb bool) {
	w.Header().Set("X-Amzn-Requestid", "fake")
	if ddb {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(s.fault.status)
		fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"fault"}`, s.fault.code)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(s.fault.status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>%s</Code><Message>fault</Message><RequestId>fake</RequestId><HostId>fake</HostId></Error>`, s.fault.code)
}

// awsSDKAttempt returns the attempt number in an Amz-Sdk-Request value, or 0.
func awsSDKAttempt(v string) int {
	for part := range strings.SplitSeq(v, ";") {
		if k, val, ok := strings.Cut(strings.TrimSpace(part), "="); ok && k == "attempt" {
			n, _ := strconv.Atoi(val)
			return n
		}
	}
	return 0
}

// awsItem is the part of a PutItem request the fake DynamoDB reads.
type awsItem struct {
	Item struct {
		ID      struct{ S string } `json:"id"`
		Payload struct{ B string } `json:"payload"`
	}
}

func awsItemID(body []byte) string {
	var it awsItem
	if json.Unmarshal(body, &it) != nil {
		return ""
	}
	return it.Item.ID.S
}

func awsItemPayloadIs(body, want []byte) bool {
	var it awsItem
	if json.Unmarshal(body, &it) != nil {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(it.Item.Payload.B)
	return err == nil && bytes.Equal(got, want)
}

// An awsClientKind is one way of giving the SDK its HTTP client.
type awsClientKind struct {
	name      string
	retryhttp bool // over a retryhttp.Transport
	sdkOff    bool // the SDK's retries off (aws.NopRetryer)
}

var (
	awsBare     = awsClientKind{name: "bare SDK"}
	awsOver     = awsClientKind{name: "SDK over retryhttp", retryhttp: true}
	awsOverOnly = awsClientKind{name: "retryhttp, SDK retries off", retryhttp: true, sdkOff: true}
	awsKinds    = []awsClientKind{awsBare, awsOver, awsOverOnly}
)

// awsClient is an S3 and a DynamoDB client over one HTTP client.
type awsClient struct {
	s3  *s3.Client
	ddb *dynamodb.Client
	rt  *retryhttp.Transport // nil for the bare SDK
}

// newAWSClient returns clients for svc. The bare SDK gets the SDK's default
// HTTP client (awshttp.BuildableClient); retryhttp gets go-cleanhttp's
// pooled transport (its default Base). Both only learn to trust the
// server's certificate. The SDK's retryer is the standard one with each
// service's default attempts (S3 3, DynamoDB 4) and backoff capped at 5 ms;
// retryhttp's backoff is full jitter from 1 ms to 5 ms, its other settings
// the defaults.
func newAWSClient(t *testing.T, svc *awsService, kind awsClientKind) *awsClient {
	roots := x509.NewCertPool()
	roots.AddCert(svc.srv.Certificate())
	tlsConf := &tls.Config{RootCAs: roots}

	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}
	c := &awsClient{}
	if kind.retryhttp {
		base := cleanhttp.DefaultPooledTransport()
		base.TLSClientConfig = tlsConf
		c.rt = &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Backoff: retryhttp.FullJitter{Base: time.Millisecond, Cap: 5 * time.Millisecond},
		}}
		t.Cleanup(c.rt.CloseIdleConnections)
		cfg.HTTPClient = &http.Client{Transport: tracing{c.rt}}
	} else {
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = tlsConf
		})
	}
	retryer := func(tries int) aws.Retryer {
		if kind.sdkOff {
			return aws.NopRetryer{}
		}
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = tries
			o.MaxBackoff = 5 * time.Millisecond
		})
	}
	c.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(svc.srv.URL)
		o.UsePathStyle = true
		o.Retryer = retryer(awsS3Tries)
	})
	c.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(svc.srv.URL)
		o.Retryer = retryer(awsDDBTries)
	})
	return c
}

// The SDK's default attempts per call.
const (
	awsS3Tries  = 3
	awsDDBTries = 4
)

// An awsCall is one SDK operation the rows exercise.
type awsCall struct {
	name  string
	tries int  // the SDK's attempts per call (its retries on)
	write bool // applies something: the ledger counts applications
	size  int  // bytes sent or read
	// keepsBody: retryhttp can send the body again (no body, or one small
	// enough to buffer); else it sends each SDK attempt once.
	keepsBody bool
	do        func(ctx context.Context, c *awsClient, id string, data []byte) error
}

// waits reports whether retryhttp retries the call's attempts itself, and
// so may hold them in its budget's line: it can send the body again, and
// the call is not a POST without a key.
func (c awsCall) waits() bool { return c.keepsBody && c.name != awsPutItem.name }

var (
	awsPutObject = awsCall{name: "S3 PutObject 256 KiB (bytes.Reader)", tries: awsS3Tries, write: true, size: 256 << 10,
		do: func(ctx context.Context, c *awsClient, id string, data []byte) error {
			_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(id), Body: bytes.NewReader(data)})
			return err
		}}
	awsPutSmall = awsCall{name: "S3 PutObject 16 KiB (bytes.Reader)", tries: awsS3Tries, write: true, size: 16 << 10, keepsBody: true,
		do: awsPutObject.do}
	awsPutStream = awsCall{name: "S3 PutObject 256 KiB (io.Reader, no Seek)", tries: awsS3Tries, write: true, size: 256 << 10,
		do: func(ctx context.Context, c *awsClient, id string, data []byte) error {
			_, err := c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(id), Body: io.MultiReader(bytes.NewReader(data))})
			return err
		}}
	awsGetObject = awsCall{name: "S3 GetObject 64 KiB", tries: awsS3Tries, size: 64 << 10, keepsBody: true,
		do: func(ctx context.Context, c *awsClient, id string, data []byte) error {
			out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(id)})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			got, err := io.ReadAll(out.Body)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, data) {
				return errors.New("object read differs from the one stored")
			}
			return nil
		}}
	awsPutItem = awsCall{name: "DynamoDB PutItem 1 KiB", tries: awsDDBTries, write: true, size: 1 << 10,
		do: func(ctx context.Context, c *awsClient, id string, data []byte) error {
			_, err := c.ddb.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String("table"),
				Item: map[string]ddbtypes.AttributeValue{
					"id":      &ddbtypes.AttributeValueMemberS{Value: id},
					"payload": &ddbtypes.AttributeValueMemberB{Value: data},
				},
			})
			return err
		}}
)

// awsResult is what one client did in one row.
type awsResult struct {
	attempts     []int // per call, sorted
	succeeded    int
	appliedTwice int           // calls applied more than once
	badBodies    int           // attempts whose whole body differed from the caller's
	cutBodies    int           // attempts whose body ended early
	mixedIDs     int           // calls whose attempts carried more than one invocation id
	late         int           // calls that ended past their deadline
	ctxErrs      int           // calls that failed with context.DeadlineExceeded
	otherErrs    int           // calls that failed with another error than the service's for the fault
	longest      time.Duration // the longest call
	elapsed      time.Duration // the whole run
	sdkRetries   int           // SDK attempts after the first that reached the server
	stats        retryhttp.Stats
	sdkHeaders   map[string]bool
	errs         []string
	lateTraces   []string      // the tries of some calls that ended late or with DeadlineExceeded
	stall        time.Duration // the longest this process stalled during the run (see stallWatch)
}

func (r *awsResult) median() int { return r.attempts[len(r.attempts)/2] }
func (r *awsResult) max() int    { return r.attempts[len(r.attempts)-1] }

// runAWS makes awsCalls calls of call through a client of kind against a
// fresh service with fault.
func runAWS(t *testing.T, call awsCall, fault awsFault, kind awsClientKind) *awsResult {
	svc := newAWSService(t, fault)
	c := newAWSClient(t, svc, kind)
	res := &awsResult{sdkHeaders: map[string]bool{}}
	ids := make([]string, awsCalls)
	for i := range ids {
		ids[i] = fmt.Sprintf("call-%02d", i)
		data := bytes.Repeat([]byte{byte('a' + i)}, call.size)
		copy(data, ids[i])
		svc.expect(ids[i], data)
	}

	var mu sync.Mutex
	sem := make(chan struct{}, fault.parallel())
	var wg sync.WaitGroup
	began := time.Now()
	stalls := watchStalls()
	for _, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), awsDeadline)
			defer cancel()
			deadline, _ := ctx.Deadline()
			ctx, trace := withTryTrace(ctx)
			err := call.do(ctx, c, id, svc.ledger(id).want)
			end := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				res.succeeded++
			} else if len(res.errs) < 3 {
				res.errs = append(res.errs, err.Error())
			}
			if end.After(deadline) {
				res.late++
			}
			if errors.Is(err, context.DeadlineExceeded) {
				res.ctxErrs++
			}
			if (end.After(deadline) || errors.Is(err, context.DeadlineExceeded)) && len(res.lateTraces) < 2 {
				res.lateTraces = append(res.lateTraces, fmt.Sprintf("%s ended %v past its deadline: %s", id, end.Sub(deadline).Round(time.Millisecond), trace))
			}
			if err != nil && awsErrCode(err) != fault.code {
				res.otherErrs++
			}
			res.longest = max(res.longest, end.Sub(start))
		})
	}
	wg.Wait()
	res.elapsed = time.Since(began)
	res.stall = stalls.Stop()

	svc.mu.Lock()
	res.cutBodies = svc.cut
	svc.mu.Unlock()
	for _, id := range ids {
		l := svc.ledger(id)
		res.attempts = append(res.attempts, l.attempts)
		if l.applied > 1 {
			res.appliedTwice++
		}
		res.badBodies += l.badBodies
		if len(l.invocations) > 1 {
			res.mixedIDs++
		}
		for n := range l.sdkAttempts {
			if n > 1 {
				res.sdkRetries++
			}
		}
		for h := range l.sdkHeaders {
			res.sdkHeaders[h] = true
		}
	}
	slices.Sort(res.attempts)
	if c.rt != nil {
		res.stats = c.rt.Stats()
	}
	return res
}

// awsErrCode returns the error code of the service's answer that err
// carries (the SDK's API error), or "".
func awsErrCode(err error) string {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// awsRows are the calls and faults measured, in the order of the table.
var awsRows = []struct {
	call   awsCall
	faults []awsFault
}{
	{awsPutObject, []awsFault{awsSlowDown, awsS3Reset, awsS3Down}},
	{awsPutSmall, []awsFault{awsSlowDown, awsS3Reset, awsS3Down}},
	{awsPutStream, []awsFault{awsSlowDown}},
	{awsGetObject, []awsFault{awsSlowDown, awsS3Reset, awsS3Down}},
	{awsPutItem, []awsFault{awsDDB503, awsDDBThrottled, awsDDBReset, awsDDBDown}},
}

// TestAWS runs every row through the three clients, checks retryhttp's
// targets and logs the table of README.md (go test -run 'TestAWS$' -v).
// Rows, and the clients of each row, run side by side (see runRows and
// runUnits), each client against a fresh service.
func TestAWS(t *testing.T) {
	t.Parallel()
	type cell struct {
		call  awsCall
		fault awsFault
	}
	var cells []cell
	for _, row := range awsRows {
		for _, fault := range row.faults {
			cells = append(cells, cell{row.call, fault})
		}
	}
	lines := make([]string, len(cells))
	runRows(t, len(cells), func(i int) string { return cells[i].call.name + "/" + cells[i].fault.name },
		func(i int) bool { return cells[i].fault.down() }, func(t *testing.T, i int) {
			call, fault := cells[i].call, cells[i].fault
			runs := make([]*awsResult, len(awsKinds))
			runUnits(len(awsKinds), func(k int) bool { return awsKinds[k].retryhttp && call.waits() },
				func(k int) { runs[k] = runAWS(t, call, fault, awsKinds[k]) })
			res := map[string]*awsResult{}
			for k, kind := range awsKinds {
				r := runs[k]
				res[kind.name] = r
				t.Logf("%s: %v, longest call %v of %v, late %d, DeadlineExceeded %d, other errors %d, budget waits %d denied %d, give-ups %v, longest stall %v, errors %q, late calls %q",
					kind.name, r.elapsed.Round(time.Millisecond), r.longest.Round(time.Millisecond), awsDeadline,
					r.late, r.ctxErrs, r.otherErrs, r.stats.BudgetWaits, r.stats.BudgetRefusals, r.stats.GiveUps,
					r.stall.Round(time.Millisecond), r.errs, r.lateTraces)
			}
			bare, over, off := res[awsBare.name], res[awsOver.name], res[awsOverOnly.name]
			checkAWS(t, call, fault, bare, over, off)
			lines[i] = fmt.Sprintf("| %s | %s | %d / %d | %d / %d | %d / %d | %d / %d / %d | %d / %d / %d | %s / %s / %s | %s |\n",
				call.name, fault.name,
				bare.median(), bare.max(), over.median(), over.max(), off.median(), off.max(),
				bare.succeeded, over.succeeded, off.succeeded,
				bare.appliedTwice, over.appliedTwice, off.appliedTwice,
				awsSeconds(bare.longest), awsSeconds(over.longest), awsSeconds(off.longest),
				awsChecks(t, call, over, off))
		})
	var table strings.Builder
	table.WriteString("| call | fault | attempts per call, median / max: bare | over retryhttp | retryhttp, SDK retries off | calls that succeeded (of 20): bare / over / off | applied twice: bare / over / off | longest call, s: bare / over / off | checks over retryhttp |\n")
	table.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range lines {
		table.WriteString(l)
	}
	t.Log("\n" + table.String())
}

// awsSeconds formats d in seconds, to a tenth.
func awsSeconds(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }

// checkAWS asserts retryhttp's targets for one row.
func checkAWS(t *testing.T, call awsCall, fault awsFault, bare, over, off *awsResult) {
	t.Helper()
	maxAttempts := 4 // retryhttp's default MaxAttempts
	for _, r := range []struct {
		name  string
		res   *awsResult
		tries int // the SDK's attempts
	}{{"over retryhttp", over, call.tries}, {"SDK retries off", off, 1}} {
		res := r.res
		// Attempts add: the SDK's N tries reach the server at most N + (MaxAttempts-1) times.
		assert.LessOrEqual(t, res.max(), r.tries+maxAttempts-1, "%s: attempts of one call", r.name)
		// retryhttp recognised every SDK retry that reached it.
		assert.Equal(t, uint64(res.sdkRetries), res.stats.RetriesFromAbove, "%s: SDK retries recognised (Stats.RetriesFromAbove)", r.name)
		if !call.keepsBody || call.name == awsPutItem.name {
			// A body retryhttp cannot replay, or a POST without a key: it sends each SDK attempt once.
			assert.Zero(t, res.stats.Retries, "%s: retryhttp retried what it cannot resend", r.name)
		}
		assert.Zero(t, res.badBodies, "%s: a body that differs from the caller's reached the service", r.name)
		assert.Zero(t, res.cutBodies, "%s: a body ended early", r.name)
		assert.Zero(t, res.mixedIDs, "%s: attempts of one call with different invocation ids", r.name)
		// Calls end within their deadline, and with the last failure rather
		// than the deadline's error: a wait in the budget's line ends a tenth
		// of the time left before the deadline, and the SDK's own tries that
		// follow carry Amz-Sdk-Request, so retryhttp sends each once, at once.
		assert.Zero(t, res.late, "%s: calls past their deadline (the process stalled up to %v): %q", r.name, res.stall, res.lateTraces)
		assert.Zero(t, res.ctxErrs, "%s: calls that failed with context.DeadlineExceeded (the process stalled up to %v): %q", r.name, res.stall, res.lateTraces)
	}
	if fault.down() {
		// A service down for good: every call fails, within its deadline, with
		// the SDK's error for the service's answer (the last failure), over
		// retryhttp as bare.
		for _, r := range []struct {
			name string
			res  *awsResult
		}{{"bare", bare}, {"over retryhttp", over}, {"SDK retries off", off}} {
			assert.Zero(t, r.res.succeeded, "%s: calls that succeeded against a service down", r.name)
			assert.Zero(t, r.res.otherErrs, "%s: calls that failed with another error than the service's %s: %v", r.name, fault.code, r.res.errs)
		}
	}
	// retryhttp applies nothing twice that the bare SDK does not, and succeeds at least as often.
	assert.LessOrEqual(t, over.appliedTwice, bare.appliedTwice, "applied twice over retryhttp")
	assert.GreaterOrEqual(t, over.succeeded, bare.succeeded, "successes over retryhttp: %v", over.errs)
	assert.Zero(t, bare.badBodies, "bare: bad bodies")
	assert.Zero(t, bare.cutBodies, "bare: bodies cut short")
	assert.Zero(t, bare.mixedIDs, "bare: invocation ids")
	assert.Zero(t, bare.late+bare.ctxErrs, "bare: calls past their deadline")
	for h := range over.sdkHeaders {
		require.Regexp(t, `^attempt=\d+; max=\d+$`, h, "Amz-Sdk-Request as sent")
	}
}

// awsChecks sums up the checks for the table.
func awsChecks(t *testing.T, call awsCall, over, off *awsResult) string {
	if t.Failed() {
		return "FAILED"
	}
	s := "bodies whole, one invocation id per call, within deadline"
	if over.stats.BudgetRefusals+off.stats.BudgetRefusals > 0 {
		s += fmt.Sprintf(", the budget's line returned the last failure of %d + %d requests",
			over.stats.BudgetRefusals, off.stats.BudgetRefusals)
	}
	if over.stats.RetriesFromAbove > 0 {
		s += fmt.Sprintf(", %d SDK retries recognised", over.stats.RetriesFromAbove)
	}
	if over.stats.Retries > 0 {
		s += fmt.Sprintf(", %d retries by retryhttp", over.stats.Retries)
	}
	return s
}

// awsRecorder is an aws.HTTPClient that keeps the requests the SDK hands
// to its HTTP client, before retryhttp or net/http see them.
type awsRecorder struct {
	client *http.Client
	mu     sync.Mutex
	reqs   []*http.Request
}

func (r *awsRecorder) Do(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.client.Do(req)
}

// TestAWSRequestShape pins what retryhttp gets from the SDK, which decides
// what it can do: attempt headers it recognises, one invocation id per
// call, and bodies it can replay only by buffering them (no GetBody).
func TestAWSRequestShape(t *testing.T) {
	svc := newAWSService(t, awsSlowDown)
	c := newAWSClient(t, svc, awsOver)
	rec := &awsRecorder{client: &http.Client{Transport: c.rt}}
	s3c := s3.New(c.s3.Options(), func(o *s3.Options) { o.HTTPClient = rec })
	data := bytes.Repeat([]byte("x"), 256<<10)
	svc.expect("shape", data)

	_, err := s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("shape"), Body: bytes.NewReader(data)})
	require.NoError(t, err)
	require.Len(t, rec.reqs, 3, "the SDK's three tries: retryhttp cannot resend a 256 KiB body without GetBody")
	for i, req := range rec.reqs {
		assert.Equal(t, fmt.Sprintf("attempt=%d; max=3", i+1), req.Header.Get("Amz-Sdk-Request"))
		assert.Equal(t, rec.reqs[0].Header.Get("Amz-Sdk-Invocation-Id"), req.Header.Get("Amz-Sdk-Invocation-Id"))
		assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, req.Header.Get("Amz-Sdk-Invocation-Id"))
		assert.Nil(t, req.GetBody, "the SDK rewinds the reader itself and gives no GetBody")
		assert.Equal(t, int64(len(data)), req.ContentLength)
		assert.Equal(t, "UNSIGNED-PAYLOAD", req.Header.Get("X-Amz-Content-Sha256"))
		assert.Empty(t, req.Header.Get("Idempotency-Key"))
	}
	assert.Equal(t, uint64(2), c.rt.Stats().RetriesFromAbove, "retryhttp recognised attempts 2 and 3")
	assert.Equal(t, uint64(1), c.rt.Stats().GiveUps[retryhttp.ReasonUnsafe], "the first try: its body cannot be sent again")
	assert.Equal(t, uint64(1), c.rt.Stats().GiveUps[retryhttp.ReasonNoRetries], "the second: the SDK retries, retryhttp sends once")

	// A body that cannot seek: chunked, "Expect: 100-continue", yet a
	// request of protocol version 0.0, for which net/http does not wait for
	// 100 Continue (it waits only for HTTP/1.1 requests): the body goes out
	// at once, even to a server that refuses it.
	rec.reqs = nil
	svc.expect("stream", data)
	_, err = s3c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("stream"), Body: io.MultiReader(bytes.NewReader(data))})
	require.ErrorContains(t, err, "failed to rewind transport stream for retry")
	require.Len(t, rec.reqs, 1)
	req := rec.reqs[0]
	assert.Equal(t, int64(-1), req.ContentLength)
	assert.Equal(t, "100-continue", req.Header.Get("Expect"))
	assert.False(t, req.ProtoAtLeast(1, 1), "Proto %q", req.Proto)
	assert.Equal(t, uint64(2), c.rt.Stats().GiveUps[retryhttp.ReasonUnsafe], "the stream was read: retryhttp cannot resend it")
}
