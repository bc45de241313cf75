package testutil

import (
	"maps"
	"slices"
	"strings"
)

// MostFirst returns the keys of counts, the largest count first, keys of
// equal counts in order: the kinds of failure a report lists.
func MostFirst(counts map[string]int) []string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if d := counts[b] - counts[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys
}
