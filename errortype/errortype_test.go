package errortype_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/errortype"
)

// Each kind of failure gets its name, wrapped or not.
func TestOfNamesEachKind(t *testing.T) {
	op := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&retryhttp.Error{Reason: retryhttp.ReasonThrottled}, "throttled"},
		{fmt.Errorf("attempt: %w", retryhttp.ErrAttemptTimeout), "timeout"},
		{os.ErrDeadlineExceeded, "timeout"},
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "canceled"},
		{op(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "connection_refused"},
		{op(os.NewSyscallError("read", syscall.ECONNRESET)), "connection_reset"},
		{&net.DNSError{Err: "no such host", Name: "api.test", IsNotFound: true}, "dns_error"},
		{errors.New("something else"), "_OTHER"},
	} {
		assert.Equal(t, tc.want, errortype.Of(tc.err), "%v", tc.err)
	}
}
