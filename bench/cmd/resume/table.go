package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// printTable writes the medians of each client's samples, with their range,
// as a Markdown table.
func printTable(w io.Writer, clients []client, samples [][]sample) {
	rows := [][]string{
		{"client", "over the wire", "peak heap, MiB", "wall time, s", "requests", "SHA-256 right"},
		{"---", "---:", "---:", "---:", "---:", "---"},
	}
	for i, c := range clients {
		ss := samples[i]
		ok := 0
		for _, s := range ss {
			if s.ok {
				ok++
			}
		}
		wire := median(ss, func(s sample) float64 { return s.wire })
		heap := median(ss, func(s sample) float64 { return float64(s.heap) / mib })
		wall := median(ss, func(s sample) float64 { return s.wall.Seconds() })
		reqs := median(ss, func(s sample) float64 { return float64(s.requests) })
		rows = append(rows, []string{
			c.name,
			fmt.Sprintf("%.2f×", wire[1]),
			fmt.Sprintf("%s (%s–%s)", mibs(heap[1]), mibs(heap[0]), mibs(heap[2])),
			fmt.Sprintf("%.2f (%.2f–%.2f)", wall[1], wall[0], wall[2]),
			fmt.Sprintf("%.0f", reqs[1]),
			fmt.Sprintf("%d of %d", ok, len(ss)),
		})
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for j, cell := range r {
			width[j] = max(width[j], len([]rune(cell)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for j, cell := range r {
			pad := strings.Repeat(" ", width[j]-len([]rune(cell)))
			switch {
			case strings.HasPrefix(cell, "---"):
				cell = cell[:3] + strings.Repeat("-", len(pad)) + cell[3:]
			case strings.HasSuffix(rows[1][j], ":"):
				cell = pad + cell // right-aligned
			default:
				cell += pad
			}
			fmt.Fprintf(&b, "| %s ", cell)
		}
		fmt.Fprintln(w, strings.TrimSpace(b.String()+"|"))
	}
}

// median returns the least, the median and the greatest of f over ss.
func median(ss []sample, f func(sample) float64) [3]float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	n := len(v)
	mid := v[n/2]
	if n%2 == 0 {
		mid = (v[n/2-1] + v[n/2]) / 2
	}
	return [3]float64{v[0], mid, v[n-1]}
}

// mibs formats v MiB: to a tenth below 10, else whole.
func mibs(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
