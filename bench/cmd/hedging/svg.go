package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// SVG layout, in pixels: a header, then two rows of panels: the steady
// runs (the latency distributions, and p99 against extra requests), and
// the shift, second by second (hedge delay, extra requests, p99).
const (
	svgWidth  = 1240
	svgMargin = 20
	svgHeader = 118 // title, notes and legend above the panels
	svgRowH   = 330 // one row of panels: title, plot, axis labels
	svgGap    = 40  // between panels
	svgLeft   = 64  // from a panel's left to its plot: y labels and title
	svgTop    = 40  // from a panel's top to its plot: its title
	svgBottom = 46  // below a plot: x labels and title
)

const (
	colText  = "#212529"
	colMuted = "#868e96"
	colGrid  = "#e9ecef"
	colShift = "#adb5bd"
)

// style is how a configuration's series look.
type style struct {
	color string
	width float64
	dash  string
}

var styles = map[string]style{
	nameNone:      {"#868e96", 1.5, ""},
	nameAdaptive:  {"#1c7ed6", 2.5, ""},
	nameFixed:     {"#2f9e44", 1.5, ""},
	nameFixedSlow: {"#2f9e44", 1.5, "6 4"},
	nameFailsafe:  {"#e8590c", 1.5, ""},
	nameFailsafeQ: {"#ae3ec9", 1.5, ""},
}

func styleOf(name string) style {
	if st, ok := styles[name]; ok {
		return st
	}
	return style{colText, 1, ""}
}

// axis maps values onto a plot's side, linearly or logarithmically.
type axis struct {
	lo, hi float64
	log    bool
	ticks  []float64
	label  func(float64) string
	title  string
}

// frac returns where v falls on the axis, from 0 to 1, clamped.
func (a axis) frac(v float64) float64 {
	lo, hi := a.lo, a.hi
	if a.log {
		v, lo, hi = math.Log10(math.Max(v, a.lo)), math.Log10(lo), math.Log10(hi)
	}
	return math.Min(math.Max((v-lo)/(hi-lo), 0), 1)
}

// plot is one panel's plotting area.
type plot struct {
	x, y, w, h float64 // the area, in pixels
	xa, ya     axis
}

func (p plot) px(v float64) float64 { return p.x + p.xa.frac(v)*p.w }
func (p plot) py(v float64) float64 { return p.y + p.h - p.ya.frac(v)*p.h }

// frame draws the panel's title, grid, axes and labels.
func (p plot) frame(b *strings.Builder, title, note string) {
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="14" font-weight="bold">%s</text>`+"\n", p.x-svgLeft+8, p.y-svgTop+14, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", p.x-svgLeft+8, p.y-svgTop+30, colMuted, html.EscapeString(note))
	for _, t := range p.ya.ticks {
		y := p.py(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", p.x, y, p.x+p.w, y, colGrid)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11">%s</text>`+"\n", p.x-5, y+4, html.EscapeString(p.ya.label(t)))
	}
	for _, t := range p.xa.ticks {
		x := p.px(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, p.y, x, p.y+p.h, colGrid)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x, p.y+p.h+15, html.EscapeString(p.xa.label(t)))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="%s"/>`+"\n", p.x, p.y, p.w, p.h, colMuted)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`+"\n", p.x+p.w/2, p.y+p.h+34, colMuted, html.EscapeString(p.xa.title))
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n",
		p.x-svgLeft+14, p.y+p.h/2, colMuted, html.EscapeString(p.ya.title))
}

// line draws a series through pts, in data units; a nil point breaks it.
func (p plot) line(b *strings.Builder, name string, pts [][2]float64) {
	st := styleOf(name)
	var d strings.Builder
	pen := "M"
	for _, pt := range pts {
		if math.IsNaN(pt[0]) || math.IsNaN(pt[1]) {
			pen = "M"
			continue
		}
		fmt.Fprintf(&d, "%s%.1f %.1f ", pen, p.px(pt[0]), p.py(pt[1]))
		pen = "L"
	}
	dash := ""
	if st.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
	}
	fmt.Fprintf(b, `<path data-series="%s" d="%s" fill="none" stroke="%s" stroke-width="%.1f"%s/>`+"\n",
		html.EscapeString(name), strings.TrimSpace(d.String()), st.color, st.width, dash)
}

// vline marks x across the plot, with a label at its top.
func (p plot) vline(b *strings.Builder, x float64, label string) {
	px := p.px(x)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n", px, p.y, px, p.y+p.h, colShift)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`+"\n", px+4, p.y+12, colMuted, html.EscapeString(label))
}

func msLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%g s", v/1000)
	default:
		return fmt.Sprintf("%g ms", v)
	}
}

func pctLabel(v float64) string { return fmt.Sprintf("%g %%", v) }

// msOf returns d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// writeSVG draws the study as one chart.
func writeSVG(w io.Writer, s *study) {
	var b strings.Builder
	height := svgHeader + 2*svgRowH + svgMargin
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12" fill="%s">`+"\n",
		svgWidth, height, svgWidth, height, colText)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="18" font-weight="bold">Hedged requests against a heavy-tailed server: retryhttp and failsafe-go</text>`+"\n", svgMargin)
	t := s.Tail
	notes := []string{
		fmt.Sprintf("Loopback server: %s per request, %s for %s of them, drawn per request; %d callers in a closed loop, %s per configuration; then %s with every latency %.0f× longer from half way.",
			ms(t.Fast), ms(t.Slow), pct(t.SlowShare), s.Workers, secs(s.Steady), secs(s.Shift), s.ShiftBy),
		fmt.Sprintf("retryhttp hedges at most %s of a host's requests, paid for by its default budget; failsafe-go hedges every request its delay passes. Fixed delays: %s, and %s tuned for the slow phase.",
			"5 %", ms(s.Delay), ms(time.Duration(float64(s.Delay)*s.ShiftBy))),
	}
	for i, n := range notes {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", svgMargin, 50+17*i, colMuted, html.EscapeString(n))
	}
	x := float64(svgMargin)
	for _, name := range []string{nameNone, nameAdaptive, nameFixed, nameFixedSlow, nameFailsafe, nameFailsafeQ} {
		st := styleOf(name)
		label := name
		switch name {
		case nameFixed, nameFailsafe:
			label += " " + ms(s.Delay)
		case nameFixedSlow:
			label += " " + ms(time.Duration(float64(s.Delay)*s.ShiftBy))
		}
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="100" x2="%.1f" y2="100" stroke="%s" stroke-width="%.1f"%s/><text x="%.1f" y="104">%s</text>`+"\n",
			x, x+22, st.color, math.Max(st.width, 2), dash, x+27, html.EscapeString(label))
		x += 40 + 6.4*float64(len([]rune(label)))
	}

	top := float64(svgHeader) + svgTop
	plotH := float64(svgRowH - svgTop - svgBottom)
	// Row 1: the steady runs.
	inner := float64(svgWidth - 2*svgMargin)
	w1 := (inner-svgGap)*0.58 - svgLeft
	w2 := (inner-svgGap)*0.42 - svgLeft
	x1 := float64(svgMargin) + svgLeft
	x2 := x1 + w1 + svgGap + svgLeft
	s.ccdf(&b, plot{x: x1, y: top, w: w1, h: plotH})
	s.tails(&b, plot{x: x2, y: top, w: w2, h: plotH})

	// Row 2: the shift.
	top += svgRowH
	w3 := (inner-2*svgGap)/3 - svgLeft
	for i, panel := range []func(*strings.Builder, plot){s.delayPanel, s.extraPanel, s.p99Panel} {
		x := float64(svgMargin) + svgLeft + float64(i)*(w3+svgLeft+svgGap)
		panel(&b, plot{x: x, y: top, w: w3, h: plotH})
	}
	b.WriteString("</svg>\n")
	io.WriteString(w, b.String())
}

// ccdf draws the share of requests slower than each latency, per steady
// configuration.
func (s *study) ccdf(b *strings.Builder, p plot) {
	p.xa = axis{lo: 1, hi: 2000, log: true, ticks: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}, label: msLabel, title: "latency (log)"}
	p.ya = axis{lo: 1e-4, hi: 1, log: true, ticks: []float64{1e-4, 1e-3, 1e-2, 1e-1, 1},
		label: func(v float64) string { return fmt.Sprintf("%g %%", 100*v) }, title: "requests slower (log)"}
	p.frame(b, fmt.Sprintf("Steady server: share of requests slower than each latency (%s each)", secs(s.Steady)),
		"a line crosses 1 % at its p99 and 0.1 % at its p99.9")
	for _, r := range s.SteadyRuns {
		ls := r.Latencies(0, s.Steady)
		p.line(b, r.Name, ccdfPoints(ls, p.xa))
	}
}

// ccdfPoints returns, at 400 latencies spread evenly over the axis, the
// share of ls (sorted) above each, as a staircase that ends at the largest
// latency.
func ccdfPoints(ls []time.Duration, xa axis) [][2]float64 {
	if len(ls) == 0 {
		return nil
	}
	var pts [][2]float64
	const n = 400
	prev := 1.0
	for i := range n + 1 {
		v := xa.lo * math.Pow(xa.hi/xa.lo, float64(i)/n)
		d := time.Duration(v * 1e6)
		k := sort.Search(len(ls), func(j int) bool { return ls[j] > d })
		share := float64(len(ls)-k) / float64(len(ls))
		if share == 0 {
			pts = append(pts, [2]float64{msOf(ls[len(ls)-1]), prev})
			break
		}
		if share != prev {
			pts = append(pts, [2]float64{v, prev})
		}
		pts = append(pts, [2]float64{v, share})
		prev = share
	}
	return pts
}

// tails draws each steady configuration's p99 and p99.9 on a row of its
// own, with its extra requests.
func (s *study) tails(b *strings.Builder, p plot) {
	p.xa = axis{lo: 5, hi: 1000, log: true, ticks: []float64{5, 10, 20, 50, 100, 200, 500, 1000}, label: msLabel, title: "latency (log): ● p99, ○ p99.9"}
	p.ya = axis{lo: 0, hi: 1, label: func(float64) string { return "" }}
	p.frame(b, "Steady server: p99 and p99.9, and extra requests", "one row per configuration")
	rows := float64(len(s.SteadyRuns))
	for i, r := range s.SteadyRuns {
		st := styleOf(r.Name)
		ls := r.Latencies(0, s.Steady)
		y := p.y + (float64(i)+0.5)*p.h/rows
		x99, x999 := p.px(msOf(bench.Quantile(ls, 0.99))), p.px(msOf(bench.Quantile(ls, 0.999)))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", p.x+6, y-10, html.EscapeString(fmt.Sprintf("%s: extra %s", s.label(r), pct(r.Extra()))))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x99, y+6, x999, y+6, st.color)
		// The ring is wider than the dot, so that a p99 as long as the
		// p99.9 shows inside it.
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="7" fill="white" stroke="%s" stroke-width="2"/>`+"\n", x999, y+6, st.color)
		fmt.Fprintf(b, `<circle data-series="%s" cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", html.EscapeString(r.Name), x99, y+6, st.color)
	}
}

// perSecondPoints returns a figure of each second of r, at the second's
// middle; NaN where fig reports none.
func (s *study) perSecondPoints(r bench.HedgeResult, fig func(bench.Second) (float64, bool)) [][2]float64 {
	n := int(s.Shift / time.Second)
	var pts [][2]float64
	for i, sec := range r.Seconds(n) {
		v, ok := fig(sec)
		if !ok {
			v = math.NaN()
		}
		pts = append(pts, [2]float64{float64(i) + 0.5, v})
	}
	return pts
}

func (s *study) secondsAxis() axis {
	n := int(s.Shift / time.Second)
	var ticks []float64
	for i := 0; i <= n; i += 2 {
		ticks = append(ticks, float64(i))
	}
	return axis{lo: 0, hi: float64(n), ticks: ticks, label: func(v float64) string { return fmt.Sprintf("%g s", v) }, title: "time"}
}

func (s *study) delayPanel(b *strings.Builder, p plot) {
	hi := 0.0
	for _, r := range s.ShiftRuns {
		for _, sec := range r.Seconds(int(s.Shift / time.Second)) {
			hi = math.Max(hi, msOf(sec.Delay))
		}
	}
	hi = math.Max(10, math.Ceil(hi*1.15/10)*10)
	var ticks []float64
	for v := 0.0; v <= hi; v += hi / 5 {
		ticks = append(ticks, v)
	}
	p.xa = s.secondsAxis()
	p.ya = axis{lo: 0, hi: hi, ticks: ticks, label: msLabel, title: "hedge delay"}
	p.frame(b, "Shift: the hedge delay, second by second", "median of each second's hedges")
	p.vline(b, s.Shift.Seconds()/2, fmt.Sprintf("%.0f× slower", s.ShiftBy))
	for _, r := range s.ShiftRuns {
		if r.Name == nameNone {
			continue
		}
		p.line(b, r.Name, s.perSecondPoints(r, func(sec bench.Second) (float64, bool) { return msOf(sec.Delay), sec.Hedges > 0 }))
	}
}

func (s *study) extraPanel(b *strings.Builder, p plot) {
	p.xa = s.secondsAxis()
	p.ya = axis{lo: 0.5, hi: 200, log: true, ticks: []float64{0.5, 1, 2, 5, 10, 20, 50, 100, 200}, label: pctLabel, title: "extra requests (log)"}
	p.frame(b, "Shift: extra requests, second by second", "retryhttp's Fraction caps hedges at 5 % of requests")
	p.vline(b, s.Shift.Seconds()/2, fmt.Sprintf("%.0f× slower", s.ShiftBy))
	for _, r := range s.ShiftRuns {
		if r.Name == nameNone {
			continue
		}
		p.line(b, r.Name, s.perSecondPoints(r, func(sec bench.Second) (float64, bool) { return 100 * sec.Extra(), sec.Requests > 0 }))
	}
}

func (s *study) p99Panel(b *strings.Builder, p plot) {
	p.xa = s.secondsAxis()
	p.ya = axis{lo: 5, hi: 2000, log: true, ticks: []float64{5, 10, 20, 50, 100, 200, 500, 1000, 2000}, label: msLabel, title: "p99 (log)"}
	p.frame(b, "Shift: p99, second by second", "of the requests that began in each second")
	p.vline(b, s.Shift.Seconds()/2, fmt.Sprintf("%.0f× slower", s.ShiftBy))
	for _, r := range s.ShiftRuns {
		p.line(b, r.Name, s.perSecondPoints(r, func(sec bench.Second) (float64, bool) { return msOf(sec.P99), sec.Requests > 0 }))
	}
}
