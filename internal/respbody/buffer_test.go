package respbody

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// Buffer checks a body against its Content-Length, whatever the base.
func TestBufferBodyChecksContentLength(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		cl    int64
		whole bool
		err   string
	}{
		{"exact", "hello", 5, true, ""},
		{"shorter", "hel", 5, false, "unexpected EOF"},
		{"longer", "hello!", 5, false, "longer than its Content-Length"},
		{"unknown length", "hello", -1, true, ""},
		{"unknown length over the bound", strings.Repeat("y", 20), -1, false, ""},
		{"known length over the bound", strings.Repeat("y", 20), 20, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testutil.NewCloseRecorder(strings.NewReader(tc.body))
			resp := &http.Response{Body: rc, ContentLength: tc.cl}
			whole, err := Buffer(context.Background(), resp, 10)
			assert.Equal(t, tc.whole, whole)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.Equal(t, 1, rc.Closes(), "closed on error")
				return
			}
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(got), "the same bytes, from memory or streaming")
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 1, rc.Closes())
		})
	}
}
