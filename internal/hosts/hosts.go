// Package hosts names hosts the one way every per-host table of a
// Transport keys them: URL hosts in ASCII lower case. Table finds the
// entry of Transport.Hosts that applies to a request's host.
package hosts

import (
	"maps"
	"net"
	"slices"
	"strings"
)

// Lower lower-cases the ASCII letters of s: host names compare
// case-insensitively in ASCII only (RFC 4343); other bytes are kept as they
// are. It allocates only when s has an upper-case letter.
func Lower(s string) string {
	i := 0
	for i < len(s) && !('A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if 'A' <= b[j] && b[j] <= 'Z' {
			b[j] += 'a' - 'A'
		}
	}
	return string(b)
}

// A Table maps request hosts to entries: exact host:port, exact host,
// then the longest "*.suffix". The zero Table has no entry.
type Table[E any] struct {
	exact    map[string]E // "host" and "host:port", lower case, no trailing dot
	suffix   map[string]E // "example.com" for "*.example.com"
	hasPorts bool
}

// NewTable returns a table of the entries of keys, each made by entry from
// its key. Keys equal once normalized ("API.example.com" and
// "api.example.com.") resolve the same way every time: the last in sorted
// order wins.
func NewTable[P, E any](keys map[string]P, entry func(key string, p P) E) Table[E] {
	var t Table[E]
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		e := entry(k, keys[k])
		k = normalize(k)
		if rest, ok := strings.CutPrefix(k, "*."); ok {
			if t.suffix == nil {
				t.suffix = make(map[string]E)
			}
			t.suffix[rest] = e
			continue
		}
		if t.exact == nil {
			t.exact = make(map[string]E)
		}
		if _, port, err := net.SplitHostPort(k); err == nil && port != "" {
			t.hasPorts = true
		}
		t.exact[k] = e
	}
	return t
}

// normalize returns the form a key is looked up in: lower case, no
// trailing dot, an IPv6 host without brackets.
func normalize(k string) string {
	k = Lower(k)
	if h, port, err := net.SplitHostPort(k); err == nil {
		return net.JoinHostPort(strings.TrimRight(h, "."), port)
	}
	k = strings.TrimRight(k, ".")
	if len(k) > 2 && k[0] == '[' && k[len(k)-1] == ']' { // an IPv6 host as URLs write it
		k = k[1 : len(k)-1]
	}
	return k
}

// Empty reports whether the table has no entry.
func (t *Table[E]) Empty() bool { return t.exact == nil && t.suffix == nil }

// Lookup returns the entry for a URL's host, and whether one matches.
func (t *Table[E]) Lookup(scheme, hostname, port string) (e E, ok bool) {
	if t.Empty() {
		return e, false
	}
	host := strings.TrimRight(Lower(hostname), ".")
	if t.hasPorts {
		if port == "" {
			switch scheme {
			case "https":
				port = "443"
			case "http":
				port = "80"
			}
		}
		if e, ok := t.exact[net.JoinHostPort(host, port)]; ok {
			return e, true
		}
	}
	if e, ok := t.exact[host]; ok {
		return e, true
	}
	for i := strings.IndexByte(host, '.'); i >= 0; {
		host = host[i+1:]
		if e, ok := t.suffix[host]; ok {
			return e, true
		}
		i = strings.IndexByte(host, '.')
	}
	return e, false
}
