package main

import (
	"fmt"
	"math"
	"strings"
)

// nanos formats a time in nanoseconds: "156 ns", "1.56 µs", "1.23 ms".
func nanos(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1e6:
		return fmt.Sprintf("%.3g ms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3g µs", v/1e3)
	default:
		return fmt.Sprintf("%.0f ns", v)
	}
}

// bytesNum formats a count of bytes.
func bytesNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1<<20:
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// count formats a count, to a tenth unless it is whole.
func count(v float64) string {
	switch r := math.Round(v*10) / 10; {
	case math.IsNaN(v):
		return "–"
	case r == math.Trunc(r):
		return fmt.Sprintf("%.0f", r)
	default:
		return fmt.Sprintf("%.1f", r)
	}
}

// times formats a ratio: "0.58×".
func times(q float64) string {
	switch {
	case math.IsNaN(q):
		return "–"
	case math.IsInf(q, 1):
		return "∞"
	case q >= 100:
		return fmt.Sprintf("%.0f×", q)
	case q >= 10:
		return fmt.Sprintf("%.1f×", q)
	case q >= 0.1:
		return fmt.Sprintf("%.2f×", q)
	default:
		return fmt.Sprintf("%.2g×", q)
	}
}

// ratioCell formats the median of per-round ratios with their middle half:
// "1.67× (1.38–1.75×)".
func ratioCell(v []float64) string {
	s := summarize(v)
	if s.n == 0 {
		return "–"
	}
	m, lo, hi := times(s.median), times(s.q1), times(s.q3)
	if lo == hi {
		return m
	}
	return m + " (" + strings.TrimSuffix(lo, "×") + "–" + hi + ")"
}

// span formats the range from a to b, writing a shared unit once.
func span(format func(float64) string, a, b float64) string {
	fa, fb := format(a), format(b)
	if i := strings.LastIndexByte(fa, ' '); i > 0 && strings.HasSuffix(fb, fa[i:]) {
		fa = fa[:i]
	}
	return fa + "–" + fb
}

func percent(v float64) string { return fmt.Sprintf("%.1f %%", v) }

func seconds(v float64) string { return fmt.Sprintf("%.2f s", v) }

func fixed(prec int) func(float64) string {
	return func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// wrapCommands breaks each shell command of s longer than width into
// lines of at most width (a word longer than that stays whole), continued
// with a backslash and indented by four spaces, at spaces outside quotes. A
// trailing comment ("cmd   # what it does") goes on a line of its own
// before its command, since a backslash in a comment continues nothing.
func wrapCommands(s string, width int) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if len(line) <= width {
			out = append(out, line)
			continue
		}
		if i := strings.Index(line, "   # "); i > 0 {
			out = append(out, strings.TrimSpace(line[i:]))
			line = strings.TrimRight(line[:i], " ")
		}
		cur := ""
		for _, w := range shellWords(line) {
			switch {
			case cur == "":
				cur = w
			case len(cur)+1+len(w)+2 > width:
				out = append(out, cur+" \\")
				cur = "    " + w
			default:
				cur += " " + w
			}
		}
		out = append(out, cur)
	}
	return strings.Join(out, "\n")
}

// shellWords splits line at the spaces outside single and double quotes.
func shellWords(line string) []string {
	var words []string
	var quote rune
	start := -1
	for i, c := range line {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ' ':
			if start >= 0 {
				words = append(words, line[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		words = append(words, line[start:])
	}
	return words
}
