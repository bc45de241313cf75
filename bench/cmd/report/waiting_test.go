package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const waitingSample = `# A waiting request's memory

Intro.

## Target

| target | figures | status |
|---|---|---|
| heap and stack | 1.0x | **met** |

## Results

Each figure is a median.

| library | heap B/request |
|---|---:|
| retryhttp | 2,650 |
| handloop | 1,924 |

The times follow.

## Method
`

// The section copies WAITING.md's target and results tables, and says
// which command fills it when the file is missing or has no table.
func TestWaitingSectionCopiesTheTables(t *testing.T) {
	tabs, err := waitingTables(waitingSample)
	require.NoError(t, err)
	assert.Equal(t, "| target | figures | status |\n|---|---|---|\n| heap and stack | 1.0x | **met** |\n\n"+
		"| library | heap B/request |\n|---|---:|\n| retryhttp | 2,650 |\n| handloop | 1,924 |", tabs)

	_, err = waitingTables(strings.Replace(waitingSample, "## Results", "## Other", 1))
	assert.ErrorContains(t, err, "no heading ## Results")
	_, err = waitingTables("# x\n\n## Target\n\nno table\n\n## Results\n")
	assert.Error(t, err)

	path := filepath.Join(t.TempDir(), "WAITING.md")
	require.NoError(t, os.WriteFile(path, []byte(waitingSample), 0o644))
	var r report
	r.waiting(path)
	assert.Contains(t, r.buf.String(), "| retryhttp | 2,650 |")

	var missing report
	missing.waiting(filepath.Join(t.TempDir(), "none.md"))
	assert.Contains(t, strings.ReplaceAll(missing.buf.String(), "\n", " "), waitingCmd, "(the prose wraps it)")
	assert.NotContains(t, missing.buf.String(), "| retryhttp")
}
