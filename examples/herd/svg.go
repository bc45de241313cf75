package main

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// SVG layout, in pixels: a grid of panels, one per strategy, the strategies
// without a budget on the left and the same ones with a budget on the right.
const (
	svgWidth     = 1200
	svgMargin    = 20
	svgHeader    = 78  // title and legend above the panels
	svgGap       = 40  // between the two columns of panels
	svgAxisLeft  = 44  // room for the y labels
	svgPanelH    = 196 // one panel: title, plot, x labels
	svgPlotTop   = 28  // from a panel's top to its plot
	svgPlotH     = 140 // plot height
	svgHeadroom  = 4   // the y axis reaches capacity times this
	svgMaxLabels = 12  // x labels per panel, at most
)

const (
	colServed   = "#2f9e44"
	colFailed   = "#f08c00"
	colOutage   = "#e9ecef"
	colCapacity = "#1c7ed6"
	colText     = "#212529"
	colMuted    = "#868e96"
)

// writeSVG draws the results as one SVG chart: for each strategy, the
// arrivals at the dependency per 10 ms over time, served and failed
// stacked, against the outage and the dependency's capacity. The y axis
// stops at svgHeadroom times the capacity; taller spikes are cut there and
// labelled with their height. Where a pixel column covers several 10 ms
// slots it shows the busiest of them.
func writeSVG(w io.Writer, sc scenario, results []*result) {
	cols := 2
	rows := (len(results) + cols - 1) / cols
	panelW := (svgWidth - 2*svgMargin - (cols-1)*svgGap) / cols
	plotW := panelW - svgAxisLeft
	height := svgHeader + rows*svgPanelH + svgMargin

	slots := 1
	for _, r := range results {
		slots = max(slots, len(r.Served))
	}
	span := niceSpan(time.Duration(slots) * slot)
	yMax := max(svgHeadroom*sc.Capacity, 1)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" fill="%s">`+"\n",
		svgWidth, height, svgWidth, height, colText)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="17" font-weight="bold">%d clients retry after a %v outage: arrivals at the dependency per 10 ms</text>`+"\n",
		svgMargin, sc.Clients, sc.Outage)
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="%s">capacity %d per 10 ms once back, up to %d attempts per client, seed %d; the y axis stops at %d per 10 ms, taller spikes are labelled</text>`+"\n",
		svgMargin, colMuted, sc.Capacity, sc.MaxAttempts, sc.Seed, yMax)
	legend := []struct{ color, label string }{{colServed, "served"}, {colFailed, "failed (down, or over capacity)"}, {colOutage, "outage"}}
	x := svgMargin
	for _, l := range legend {
		fmt.Fprintf(&b, `<rect x="%d" y="56" width="12" height="12" fill="%s"/><text x="%d" y="67">%s</text>`+"\n", x, l.color, x+16, html.EscapeString(l.label))
		x += 30 + 7*len(l.label)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="62" x2="%d" y2="62" stroke="%s" stroke-dasharray="4 3"/><text x="%d" y="67">capacity</text>`+"\n",
		x, x+20, colCapacity, x+24)

	for i, r := range results {
		col, row := i/rows, i%rows
		left := svgMargin + col*(panelW+svgGap)
		top := svgHeader + row*svgPanelH
		writePanel(&b, sc, r, float64(left), float64(top), float64(plotW), span, yMax)
	}
	b.WriteString("</svg>\n")
	io.WriteString(w, b.String())
}

// writePanel draws one strategy's plot with its top-left corner at
// (left, top).
func writePanel(b *strings.Builder, sc scenario, r *result, left, top, plotW float64, span time.Duration, yMax int) {
	x0 := left + svgAxisLeft
	y0 := top + svgPlotTop + svgPlotH // the plot's baseline
	xOf := func(t time.Duration) float64 { return x0 + plotW*float64(t)/float64(span) }
	yOf := func(n int) float64 { return y0 - svgPlotH*float64(min(n, yMax))/float64(yMax) }

	title := fmt.Sprintf("%s: %d attempts", r.Strategy.Name, r.Attempts)
	if n := r.Unfinished(); n > 0 {
		title += fmt.Sprintf(", %d clients never succeeded", n)
	} else {
		title += fmt.Sprintf(", all succeeded by %s", seconds(r.LastSuccess))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold">%s</text>`+"\n", x0, top+14, html.EscapeString(title))

	// Outage, axes and ticks.
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n",
		x0, y0-svgPlotH, xOf(min(sc.Outage, span))-x0, svgPlotH, colOutage)
	for _, n := range []int{0, sc.Capacity, yMax} {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%d</text>`+"\n", x0-4, yOf(n)+4, colMuted, n)
	}
	step := tickStep(span)
	for t := time.Duration(0); t <= span; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", xOf(t), y0, xOf(t), y0+4, colMuted)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%gs</text>`+"\n", xOf(t), y0+17, colMuted, t.Seconds())
	}

	// Columns: one per pixel or per slot, whichever is wider; each shows
	// its busiest slot.
	perCol := max(1, int(float64(span/slot)/plotW+0.999))
	var served, failed strings.Builder
	type spike struct {
		x float64
		n int
	}
	var spikes []spike
	for c := 0; c*perCol < len(r.Served); c++ {
		best := -1
		for i := c * perCol; i < (c+1)*perCol && i < len(r.Served); i++ {
			if best < 0 || r.Served[i]+r.Failed[i] > r.Served[best]+r.Failed[best] {
				best = i
			}
		}
		s, f := r.Served[best], r.Failed[best]
		if s+f == 0 {
			continue
		}
		xl := xOf(time.Duration(c*perCol) * slot)
		xr := max(xOf(time.Duration((c+1)*perCol)*slot), xl+1) // at least a pixel wide
		rect(&served, xl, yOf(s), xr-xl, y0-yOf(s))
		rect(&failed, xl, yOf(s+f), xr-xl, yOf(s)-yOf(s+f))
		if s+f > yMax {
			spikes = append(spikes, spike{(xl + xr) / 2, s + f})
		}
	}
	fmt.Fprintf(b, `<path fill="%s" d="%s"/>`+"\n", colServed, served.String())
	fmt.Fprintf(b, `<path fill="%s" d="%s"/>`+"\n", colFailed, failed.String())

	// Label cut spikes to their right, leaving room between labels: the
	// tallest of neighbours wins.
	lastX := -1e9
	for i, s := range spikes {
		if s.x-lastX < 34 {
			continue
		}
		n := s.n
		for _, t := range spikes[i+1:] {
			if t.x-s.x >= 34 {
				break
			}
			n = max(n, t.n)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11">%d</text>`+"\n", s.x+3, y0-svgPlotH+10, n)
		lastX = s.x
	}

	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n",
		x0, yOf(sc.Capacity), x0+plotW, yOf(sc.Capacity), colCapacity)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, y0, x0+plotW, y0, colText)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, y0, x0, y0-svgPlotH, colText)
}

// rect appends a rectangle to an SVG path.
func rect(b *strings.Builder, x, y, w, h float64) {
	if h <= 0 {
		return
	}
	fmt.Fprintf(b, "M%.1f %.1fh%.1fv%.1fh%.1fz", x, y, w, h, -w)
}

// niceSpan rounds d up to a whole number of tick steps.
func niceSpan(d time.Duration) time.Duration {
	step := tickStep(d)
	return max(step, (d+step-1)/step*step)
}

// tickStep returns a round distance between x labels for a span of d.
func tickStep(d time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute} {
		if d <= s*svgMaxLabels {
			return s
		}
	}
	return (d/svgMaxLabels + time.Minute - 1) / time.Minute * time.Minute
}
