package hosts

import (
	"net"
	"strings"
	"testing"
)

// FuzzHostTable feeds arbitrary Hosts keys and request hosts to the host
// table. It must never panic, normalizing a key twice must change nothing,
// and a request host must match the same way whatever the case of its ASCII
// letters and with or without a trailing dot.
func FuzzHostTable(f *testing.F) {
	for _, seed := range [][2]string{
		{"api.example.com", "api.example.com"},
		{"API.Example.COM.", "api.example.com"},
		{"*.example.com", "a.b.example.com"},
		{"*.example.com", "example.com"},
		{"api.example.com:8443", "api.example.com"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"*.", "."},
		{"*", ""},
		{":", ":"},
		{"[", "]"},
		{"ſ", "ſ"}, // LATIN SMALL LETTER LONG S: no ASCII case
	} {
		f.Add(seed[0], seed[1], "https", "")
	}
	f.Fuzz(func(t *testing.T, key, host, scheme, port string) {
		n := normalize(key)
		if again := normalize(n); again != n {
			t.Fatalf("normalize not idempotent: %q -> %q -> %q", key, n, again)
		}
		table := NewTable(map[string]int{key: 1}, func(_ string, v int) int { return v })
		_, got := table.Lookup(scheme, host, port)
		if _, alt := table.Lookup(scheme, upperASCII(host), port); alt != got {
			t.Fatalf("key %q: host %q matched %v, upper case %v", key, host, got, alt)
		}
		if !strings.HasSuffix(host, ".") {
			if _, alt := table.Lookup(scheme, host+".", port); alt != got {
				t.Fatalf("key %q: host %q matched %v, with trailing dot %v", key, host, got, alt)
			}
		}
		// A plain host key (no wildcard, no port) always matches its own host.
		if !strings.Contains(n, "*") && !strings.ContainsAny(n, ":[]") && n != "" {
			if _, ok := table.Lookup("http", n, ""); !ok {
				t.Fatalf("key %q (normalized %q) does not match its own host", key, n)
			}
		}
		if h, p, err := net.SplitHostPort(n); err == nil && !strings.HasPrefix(n, "*.") && p != "" && h != "" {
			if _, ok := table.Lookup("http", h, p); !ok {
				t.Fatalf("key %q does not match host %q port %q", key, h, p)
			}
		}
	})
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}
