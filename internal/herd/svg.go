package main

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// SVG layout, in pixels: a grid of panels, one row per backoff and one
// column per budget (none, retryhttp's).
const (
	svgWidth     = 1500
	svgMargin    = 20
	svgHeader    = 150 // title, legend and column heads above the panels
	svgGap       = 36  // between columns of panels
	svgAxisLeft  = 58  // from a panel's left to its plot: y title and labels
	svgPadRight  = 50  // from a plot's right to its panel's edge: the clients axis
	svgPanelH    = 262 // one panel: title, spike labels, plot, x labels and title
	svgTitleH    = 36  // a panel's two title lines
	svgLabelRow  = 11  // one row of spike labels
	svgLabelRows = 4   // rows of spike labels above a plot; more go inside it
	svgPlotH     = 140 // plot height
	svgAxisGap   = 4   // between the y axis line and the plot's first column
	svgHeadroom  = 4   // the y axis reaches capacity times this
	svgMaxLabels = 8   // x labels per panel, at most
	svgDigitW    = 6.5 // width of a digit of a spike label
)

const (
	colServed   = "#2f9e44"
	colFailed   = "#f08c00"
	colOutage   = "#e9ecef"
	colCapacity = "#1c7ed6"
	colDone     = "#1b5e20" // served so far
	colGaveUp   = "#c92a2a" // gave up so far
	colLine     = "#7048e8" // waiting in the budget's line
	colText     = "#212529"
	colMuted    = "#868e96"
)

// budgetNote says in a column head what a budget does with a retry.
func budgetNote(k budgetKind) string {
	if k == inLine {
		return "once another client fails, a retry waits in line; probes, then successes, let it go"
	}
	return "every retry goes after its backoff"
}

// writeSVG draws the results as one SVG chart: for each strategy, the
// arrivals at the dependency per 10 ms over time, served and failed
// stacked, against the outage and the dependency's capacity. Each panel's
// time axis spans its own run (and at least twice the outage); the y axis,
// the same for all, stops at svgHeadroom times the capacity: taller spikes
// are cut there and labelled with their height. Where a pixel column covers
// several 10 ms slots it shows the busiest of them. Lines against a second
// axis count the clients served and failed so far, and the retries waiting
// in the budgets' lines.
func writeSVG(w io.Writer, sc scenario, results []*result) {
	grid := groups(results)
	cols := 1
	for _, g := range grid {
		cols = max(cols, len(g))
	}
	panelW := float64(svgWidth-2*svgMargin-(cols-1)*svgGap) / float64(cols)
	height := svgHeader + len(grid)*svgPanelH + svgMargin
	yMax := max(svgHeadroom*sc.Capacity, 1)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" fill="%s">`+"\n",
		svgWidth, height, svgWidth, height, colText)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="18" font-weight="bold">%d clients retry after a %v outage: arrivals at the dependency per 10 ms</text>`+"\n",
		svgMargin, sc.Clients, sc.Outage)
	sub := []string{
		fmt.Sprintf("First requests within %v; once back, the dependency serves %d per 10 ms and fails the rest with 503. Up to %d attempts per client; seed %d.",
			sc.Spread, sc.Capacity, sc.MaxAttempts, sc.Seed),
		fmt.Sprintf("Budgets: another client's failure holds a retry in line until a probe or a success; %d retries of credit, %.2g earned per success; %s. Every y axis stops at %d per 10 ms: taller spikes are cut and labelled with their height.",
			defaultCredit, defaultRatio, budgetScope(sc.Transports), yMax),
	}
	for i, s := range sub {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", svgMargin, 50+18*i, colMuted, html.EscapeString(s))
	}
	legend := []struct{ color, label string }{{colServed, "served"}, {colFailed, "failed (down, or over capacity)"}, {colOutage, "dependency down"}}
	x := svgMargin
	for _, l := range legend {
		fmt.Fprintf(&b, `<rect x="%d" y="84" width="12" height="12" fill="%s"/><text x="%d" y="95">%s</text>`+"\n", x, l.color, x+16, html.EscapeString(l.label))
		x += 34 + 6*len(l.label) + len(l.label)/2
	}
	x += 8
	fmt.Fprintf(&b, `<line x1="%d" y1="90" x2="%d" y2="90" stroke="%s" stroke-dasharray="4 3"/><text x="%d" y="95">capacity</text>`+"\n",
		x, x+20, colCapacity, x+24)
	x += 100
	fmt.Fprintf(&b, `<text x="%d" y="95" fill="%s">clients (right axis):</text>`+"\n", x, colMuted)
	x += 128
	for _, l := range []struct{ color, label string }{{colDone, "served so far"}, {colGaveUp, "failed so far"}, {colLine, "retries waiting in the budget's line"}} {
		fmt.Fprintf(&b, `<line x1="%d" y1="90" x2="%d" y2="90" stroke="%s" stroke-width="2"/><text x="%d" y="95">%s</text>`+"\n",
			x, x+20, l.color, x+24, html.EscapeString(l.label))
		x += 40 + 6*len(l.label) + len(l.label)/2
	}

	if len(grid) > 0 {
		for c, r := range grid[0] {
			left := float64(svgMargin) + float64(c)*(panelW+svgGap)
			k := r.Strategy.Budget
			fmt.Fprintf(&b, `<text x="%.1f" y="126" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(k.String()))
			fmt.Fprintf(&b, `<text x="%.1f" y="143" fill="%s">%s</text>`+"\n", left, colMuted, html.EscapeString(budgetNote(k)))
		}
	}
	for row, g := range grid {
		for c, r := range g {
			left := float64(svgMargin) + float64(c)*(panelW+svgGap)
			top := float64(svgHeader + row*svgPanelH)
			writePanel(&b, sc, r, left, top, panelW, yMax)
		}
	}
	b.WriteString("</svg>\n")
	io.WriteString(w, b.String())
}

// A spike is a run of adjacent plot columns cut at the top of the y axis.
type spike struct {
	left, right float64 // its columns' extent
	n           int     // the most arrivals in one of its slots
}

// A panel is where one strategy's plot goes: its geometry, and how times
// and counts map to pixels.
type panel struct {
	left, top   float64       // the panel's top-left corner
	x0          float64       // the y axis line
	px0         float64       // the plot's first column, off the y axis line
	plotW       float64       // the plot's width
	plotTop, y0 float64       // the plot's top and baseline
	span        time.Duration // the time axis, from 0
	perCol      int           // 10 ms slots per plot column
	colW        float64       // one plot column's width
	yMax        int           // the top of the y axis
}

// newPanel lays out the panel whose top-left corner is at (left, top) for
// r's run. Its plot has one column per pixel or per slot, whichever is
// wider.
func newPanel(sc scenario, r *result, left, top, panelW float64, yMax int) panel {
	p := panel{left: left, top: top, yMax: yMax}
	p.x0 = left + svgAxisLeft
	p.plotW = panelW - svgAxisLeft - svgPadRight - svgAxisGap
	p.px0 = p.x0 + svgAxisGap
	p.plotTop = top + svgTitleH + svgLabelRows*svgLabelRow
	p.y0 = p.plotTop + svgPlotH
	p.span = niceSpan(max(time.Duration(len(r.Served))*slot, 2*sc.Outage))
	p.perCol = max(1, int(float64(p.span/slot)/p.plotW+0.999))
	p.colW = p.plotW * float64(p.perCol*int(slot)) / float64(p.span)
	return p
}

// xOf returns the x of time t on the panel's time axis.
func (p panel) xOf(t time.Duration) float64 {
	return p.px0 + p.plotW*float64(t)/float64(p.span)
}

// yOf returns the y of n arrivals on the panel's y axis, cut at its top.
func (p panel) yOf(n int) float64 {
	return p.y0 - svgPlotH*float64(min(n, p.yMax))/float64(p.yMax)
}

// writePanel draws one strategy's plot in the panel whose top-left corner
// is at (left, top).
func writePanel(b *strings.Builder, sc scenario, r *result, left, top, panelW float64, yMax int) {
	p := newPanel(sc, r, left, top, panelW, yMax)
	writePanelAxes(b, sc, r, p)
	writeArrivals(b, sc, r, p)
	writeClients(b, sc, r, p)
	writeNoneLeft(b, sc, r, p)
}

// writePanelAxes draws a panel's title (the strategy, then what it did),
// the outage behind its plot, and its axes' labels and titles.
func writePanelAxes(b *strings.Builder, sc scenario, r *result, p panel) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", p.left, p.top+14, html.EscapeString(r.Strategy.Name))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11.5">%s</text>`+"\n", p.left, p.top+30, html.EscapeString(panelSummary(sc, r)))

	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n",
		p.px0, p.plotTop, p.xOf(min(sc.Outage, p.span))-p.px0, svgPlotH, colOutage)
	for _, n := range []int{0, sc.Capacity, p.yMax} {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%d</text>`+"\n", p.x0-5, p.yOf(n)+4, colMuted, n)
	}
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" font-size="11" fill="%s">arrivals per 10 ms</text>`+"\n",
		p.left+12, p.plotTop+svgPlotH/2, colMuted)
	step := tickStep(p.span)
	for t := time.Duration(0); t <= p.span; t += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", p.xOf(t), p.y0, p.xOf(t), p.y0+4, colMuted)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%g</text>`+"\n", p.xOf(t), p.y0+17, colMuted, t.Seconds())
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="%s">seconds since the outage began</text>`+"\n",
		p.px0+p.plotW/2, p.y0+32, colMuted)
}

// writeArrivals draws a panel's arrivals, served and failed stacked, one
// column showing the busiest slot it covers; then the capacity line, the
// axis lines, and above the plot the height of every spike cut at its top.
func writeArrivals(b *strings.Builder, sc scenario, r *result, p panel) {
	var served, failed, cuts strings.Builder
	var spikes []spike
	for c := 0; c*p.perCol < len(r.Served); c++ {
		best := c * p.perCol
		for i := best; i < (c+1)*p.perCol && i < len(r.Served); i++ {
			if r.Served[i]+r.Failed[i] > r.Served[best]+r.Failed[best] {
				best = i
			}
		}
		s, f := r.Served[best], r.Failed[best]
		if s+f == 0 {
			continue
		}
		xl := p.xOf(time.Duration(c*p.perCol) * slot)
		xr := xl + max(p.colW, 1) // at least a pixel wide
		rect(&served, xl, p.yOf(s), xr-xl, p.y0-p.yOf(s))
		rect(&failed, xl, p.yOf(s+f), xr-xl, p.yOf(s)-p.yOf(s+f))
		if s+f > p.yMax {
			rect(&cuts, xl, p.plotTop+5, xr-xl, 2) // the cut
			if n := len(spikes); n > 0 && xl-spikes[n-1].right < p.colW/2+0.5 {
				spikes[n-1].right = xr
				spikes[n-1].n = max(spikes[n-1].n, s+f)
			} else {
				spikes = append(spikes, spike{xl, xr, s + f})
			}
		}
	}
	fmt.Fprintf(b, `<path fill="%s" d="%s"/>`+"\n", colServed, served.String())
	fmt.Fprintf(b, `<path fill="%s" d="%s"/>`+"\n", colFailed, failed.String())
	fmt.Fprintf(b, `<path fill="white" d="%s"/>`+"\n", cuts.String())
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n",
		p.px0, p.yOf(sc.Capacity), p.px0+p.plotW, p.yOf(sc.Capacity), colCapacity)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", p.x0, p.y0, p.px0+p.plotW, p.y0, colText)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", p.x0, p.y0, p.x0, p.plotTop, colText)
	labelSpikes(b, spikes, p.plotTop)
}

// writeClients draws a panel's right axis, and against it the clients
// served and failed so far, and the retries waiting in the budget's line.
// A line is drawn only if it ever leaves zero.
func writeClients(b *strings.Builder, sc scenario, r *result, p panel) {
	right := p.px0 + p.plotW
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", right+svgAxisGap, p.y0, right+svgAxisGap, p.plotTop, colMuted)
	for _, n := range []int{0, sc.Clients} {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%d</text>`+"\n", right+svgAxisGap+4, p.y0-svgPlotH*float64(n)/float64(max(sc.Clients, 1))+4, colMuted, n)
	}
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(90)" text-anchor="middle" font-size="11" fill="%s">clients</text>`+"\n",
		right+svgAxisGap+38, p.plotTop+svgPlotH/2, colMuted)
	done, gaveUp := 0, 0
	var pDone, pGaveUp, pLine strings.Builder
	yClients := func(n int) float64 { return p.y0 - svgPlotH*float64(n)/float64(max(sc.Clients, 1)) }
	for c := 0; c*p.perCol < len(r.Served); c++ {
		xl := p.xOf(time.Duration(c*p.perCol) * slot)
		xr := xl + p.colW
		line := 0
		for i := c * p.perCol; i < (c+1)*p.perCol && i < len(r.Served); i++ {
			done += r.Served[i]
			gaveUp += r.GaveUp[i]
			line = max(line, r.InLine[i])
		}
		fmt.Fprintf(&pDone, "%.1f,%.1f %.1f,%.1f ", xl, yClients(done), xr, yClients(done))
		fmt.Fprintf(&pGaveUp, "%.1f,%.1f %.1f,%.1f ", xl, yClients(gaveUp), xr, yClients(gaveUp))
		fmt.Fprintf(&pLine, "%.1f,%.1f %.1f,%.1f ", xl, yClients(line), xr, yClients(line))
	}
	fmt.Fprintf(&pDone, "%.1f,%.1f", right, yClients(done))
	fmt.Fprintf(&pGaveUp, "%.1f,%.1f", right, yClients(gaveUp))
	for _, l := range []struct {
		color  string
		points string
		show   bool
	}{{colDone, pDone.String(), done > 0}, {colGaveUp, pGaveUp.String(), gaveUp > 0}, {colLine, pLine.String(), r.BudgetWaits > 0}} {
		if l.show {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>`+"\n", l.points, l.color)
		}
	}
}

// writeNoneLeft says, where the arrivals would be, that nothing was left
// to arrive once the dependency was back, if so.
func writeNoneLeft(b *strings.Builder, sc scenario, r *result, p panel) {
	if r.Attempts == 0 || r.LastEnd >= sc.Outage {
		return
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">dependency back at %s:</text>`+"\n",
		p.xOf(sc.Outage)+8, p.y0-svgPlotH/2, colMuted, seconds(sc.Outage))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">no request left to serve</text>`+"\n",
		p.xOf(sc.Outage)+8, p.y0-svgPlotH/2+16, colMuted)
}

// labelSpikes writes the height of every cut spike above it: each label
// right of its spike, in the first row of labels (from the plot's top
// upwards) where it overlaps no other label, joined to the spike by a line.
// Rows beyond svgLabelRows go inside the plot, on a white ground.
func labelSpikes(b *strings.Builder, spikes []spike, plotTop float64) {
	var ends []float64 // per row, the right end of its last label
	for _, s := range spikes {
		text := fmt.Sprint(s.n)
		x := s.right + 2
		w := svgDigitW*float64(len(text)) + 3
		row := 0
		for row < len(ends) && x < ends[row] {
			row++
		}
		if row == len(ends) {
			ends = append(ends, 0)
		}
		ends[row] = x + w + 6                       // and a gap
		y := plotTop - 3 - float64(row)*svgLabelRow // the label's baseline
		if row >= svgLabelRows {
			y = plotTop + 7 + float64(row-svgLabelRows+1)*svgLabelRow
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="white" fill-opacity="0.85"/>`+"\n", x, y-9, w, svgLabelRow)
		}
		mid := (s.left + s.right) / 2
		fmt.Fprintf(b, `<polyline points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="0.8"/>`+"\n",
			mid, plotTop, mid, y-3, x, y-3, colMuted)
		fmt.Fprintf(b, `<text class="spike" x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", x+1, y, text)
	}
}

// panelSummary says in one line what a strategy did for the clients.
func panelSummary(sc scenario, r *result) string {
	s := fmt.Sprintf("%d attempts, %.2f per client; ", r.Attempts, r.PerClient())
	switch r.Succeeded {
	case sc.Clients:
		s += fmt.Sprintf("all %d served by %s", sc.Clients, seconds(r.LastSuccess))
	case 0:
		s += fmt.Sprintf("none of %d served", sc.Clients)
	default:
		s += fmt.Sprintf("%d of %d served", r.Succeeded, sc.Clients)
	}
	if r.BudgetWaits > 0 {
		s += fmt.Sprintf("; %d let go from the line", r.BudgetWaits)
	}
	return s
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
