package retryhttp

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/classify"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// classedErr is a base's error that says what became of the request, as
// the http3 module's do: it wraps io.EOF, which the rules alone would take
// for a connection lost under a request in flight.
type classedErr struct{ transient, nothingSent bool }

func (e classedErr) Error() string                             { return "classed" }
func (e classedErr) Unwrap() error                             { return io.EOF }
func (e classedErr) RetryClass() (transient, nothingSent bool) { return e.transient, e.nothingSent }

// A base's error that has a RetryClass method decides before every other
// rule: "nothing sent" makes an unkeyed POST safe to send again; "not
// transient" stops even a GET's retry of an error the rules would retry.
func TestABaseErrorsRetryClassDecides(t *testing.T) {
	b := &testutil.Base{Answer: testutil.FailsOnce(classedErr{nothingSent: true})}
	resp, _ := sendOK(t, keysOn(b, nil), newKeyRequest(t, http.MethodPost, "x"))
	assert.Equal(t, 2, Attempts(resp), "nothing sent: the POST is retried")

	b = &testutil.Base{Answer: testutil.FailsOnce(classedErr{transient: true})}
	_, err := keysOn(b, nil).RoundTrip(newKeyRequest(t, http.MethodPost, "x"))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, ReasonUnsafe, e.Reason, "maybe processed: the POST is not retried")

	b = &testutil.Base{Answer: testutil.FailsOnce(classedErr{transient: true})}
	resp, _ = sendOK(t, keysOn(b, nil), newKeyRequest(t, http.MethodGet, ""))
	assert.Equal(t, 2, Attempts(resp), "transient: the GET is retried")

	b = &testutil.Base{Answer: testutil.FailsOnce(classedErr{})}
	_, err = keysOn(b, nil).RoundTrip(newKeyRequest(t, http.MethodGet, ""))
	require.ErrorAs(t, err, &e)
	assert.Equal(t, ReasonNotTransient, e.Reason, "not transient: not retried, though it wraps io.EOF")
	assert.Equal(t, 1, b.Attempts())
}

// classedCertErr is a base's error that calls a certificate failure
// transient.
type classedCertErr struct{ classedErr }

func (classedCertErr) Unwrap() error {
	return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
}

// A certificate failure is never retried, whatever a base's RetryClass
// says of it: every new connection would meet it again.
func TestACertificateFailureIsNotRetriedWhateverTheBaseSays(t *testing.T) {
	b := &testutil.Base{Answer: testutil.FailsOnce(classedCertErr{classedErr{transient: true, nothingSent: true}})}
	_, err := keysOn(b, nil).RoundTrip(newKeyRequest(t, http.MethodGet, ""))
	gaveUp(t, err, ReasonNotTransient, 0)
	assert.Equal(t, 1, b.Attempts())
}

// net/http wraps a failure to reach a proxy as an OpError "proxyconnect",
// whatever failed beneath (a dial that timed out, a TLS handshake with the
// proxy): nothing of the request was sent, and whether another attempt may
// help is the inner error's.
func TestAProxyConnectFailureSentNothing(t *testing.T) {
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	assert.Equal(t, classify.Class{Transient: true, NothingSent: true},
		classify.Of(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: timeout}))
	assert.Equal(t, classify.Class{Transient: true, NothingSent: true},
		classify.Of(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: io.EOF}))
}
