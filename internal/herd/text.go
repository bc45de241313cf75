package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The histograms' layout, in characters: the results of one backoff side
// by side, one row per time bucket.
const (
	barWidth = 14 // a bar this long is what the dependency serves in a bucket
	maxRows  = 16 // time buckets per backoff, at most
)

// A bucket sums the arrivals of consecutive slots.
type bucket struct {
	Served, Failed int
	Peak           int // most arrivals in one slot of the bucket
}

// buckets sums r's slots into buckets of the given width, a multiple of slot.
func buckets(r *result, width time.Duration) []bucket {
	per := int(width / slot)
	out := make([]bucket, (len(r.Served)+per-1)/per)
	for i := range r.Served {
		b := &out[i/per]
		b.Served += r.Served[i]
		b.Failed += r.Failed[i]
		b.Peak = max(b.Peak, r.Served[i]+r.Failed[i])
	}
	return out
}

// bucketWidth returns the narrowest round width that shows every result's
// whole run in at most rows buckets.
func bucketWidth(results []*result, rows int) time.Duration {
	slots := 0
	for _, r := range results {
		slots = max(slots, len(r.Served))
	}
	end := time.Duration(slots) * slot
	widths := []time.Duration{10, 20, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 30000, 60000}
	for _, w := range widths {
		if w := w * time.Millisecond; end <= w*time.Duration(rows) {
			return w
		}
	}
	n := (end + time.Duration(rows)*time.Minute - 1) / (time.Duration(rows) * time.Minute)
	return n * time.Minute
}

// groups splits results into runs of consecutive results of one backoff.
func groups(results []*result) [][]*result {
	var out [][]*result
	for i, r := range results {
		if i == 0 || r.Strategy.BackoffName != results[i-1].Strategy.BackoffName {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], r)
	}
	return out
}

// writeHistograms draws, for each backoff, its results side by side: one
// row per time bucket, the served arrivals as █ and the failed ones as ░.
// A bar of barWidth characters is what the dependency serves in a bucket;
// a longer one is cut and ends in ».
func writeHistograms(w io.Writer, sc scenario, results []*result) {
	fmt.Fprintf(w, "Arrivals at the dependency over time: █ served, ░ failed (down, or over capacity). A bar of\n")
	fmt.Fprintf(w, "%d characters is what the dependency serves in a row's time (%d per 10 ms); longer bars are cut (»).\n",
		barWidth, sc.Capacity)
	fmt.Fprintf(w, "(n): the busiest 10 ms of the row, when over capacity.\n")
	for _, g := range groups(results) {
		width := bucketWidth(g, maxRows)
		all := make([][]bucket, len(g))
		rows, count, peak := 0, 1, 0 // rows, and the widths of the counts and the peaks
		for i, r := range g {
			all[i] = buckets(r, width)
			rows = max(rows, len(all[i]))
			for _, b := range all[i] {
				count = max(count, len(fmt.Sprint(b.Served+b.Failed)))
				if b.Peak > sc.Capacity {
					peak = max(peak, len(fmt.Sprintf("(%d)", b.Peak)))
				}
			}
		}
		full := sc.Capacity * int(width/slot) // what the dependency serves in a bucket
		cell := 1 + barWidth + 1 + 1 + count + 1 + peak

		fmt.Fprintf(w, "\n%s, one row per %v:\n", g[0].Strategy.BackoffName, width)
		line := strings.Repeat(" ", 12)
		for _, r := range g {
			line += fmt.Sprintf("%-*s", cell, " "+r.Strategy.Budget.String())
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		for j := range rows {
			at := time.Duration(j) * width
			state := ""
			if at < sc.Outage {
				state = "down"
			}
			line := fmt.Sprintf("%6s %-4s ", seconds(at), state)
			for i := range g {
				line += "│"
				if j >= len(all[i]) {
					line += strings.Repeat(" ", cell-1)
					continue
				}
				b := all[i][j]
				line += histCell(b, full, count, peak, sc.Capacity)
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
	fmt.Fprintln(w)
}

// histCell returns one result's bucket: its bar, its arrivals and, when
// over capacity, its busiest slot, padded to the widths given.
func histCell(b bucket, full, count, peak, capacity int) string {
	n := b.Served + b.Failed
	if n == 0 {
		return strings.Repeat(" ", barWidth+3+count+peak)
	}
	served, failed := chars(b.Served, full), chars(b.Failed, full)
	cut := " "
	if n > full { // cut at barWidth, whatever the rounding
		served = min(served, barWidth)
		failed = barWidth - served
		cut = "»"
	}
	failed = min(failed, barWidth-served) // two parts rounded up
	bar := strings.Repeat("█", served) + strings.Repeat("░", failed) + cut
	bar += strings.Repeat(" ", barWidth+1-served-failed-1)
	p := ""
	if b.Peak > capacity {
		p = fmt.Sprintf("(%d)", b.Peak)
	}
	return fmt.Sprintf("%s %*d %-*s", bar, count, n, peak, p)
}

// chars returns the length of a bar for n when full fills barWidth; any
// n > 0 gets at least one character.
func chars(n, full int) int {
	if n <= 0 {
		return 0
	}
	return max(1, (n*barWidth+full/2)/max(full, 1))
}

// short names of the budgets, for the table.
func (k budgetKind) short() string {
	if k == inLine {
		return "retryhttp"
	}
	return "none"
}

// writeTable prints one line of figures per result.
func writeTable(w io.Writer, sc scenario, results []*result) {
	name := len("backoff")
	for _, r := range results {
		name = max(name, len(r.Strategy.BackoffName))
	}
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%-9s\tpeak/10ms\t\tper\tall succeeded\tnever succeeded:\t\t\n", name, "", "")
	fmt.Fprintf(tw, "%-*s\t%-9s\tonce up\tattempts\tclient\tby\tout of attempts\tbudget\t\n", name, "backoff", "budget")
	for _, r := range results {
		done := "never"
		if r.Unfinished() == 0 {
			done = seconds(r.LastSuccess)
		}
		fmt.Fprintf(tw, "%-*s\t%-9s\t%d\t%d\t%.2f\t%s\t%d\t%d\t\n", name, r.Strategy.BackoffName, r.Strategy.Budget.short(),
			r.Peak(sc.Outage), r.Attempts, r.PerClient(), done, r.Exhausted, r.BudgetRefusals)
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// writeGlance sums up the results of the default backoff, full jitter,
// if it ran: what each budget did for the clients and to the dependency.
func writeGlance(w io.Writer, sc scenario, results []*result) {
	var g []*result
	for _, r := range results {
		if r.Strategy.BackoffName == "full jitter" {
			g = append(g, r)
		}
	}
	if len(g) == 0 {
		return
	}
	fmt.Fprintf(w, "\nIn short, with full jitter (retryhttp's default backoff):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range g {
		var served string
		switch r.Succeeded {
		case sc.Clients:
			served = fmt.Sprintf("all %d served by %s", sc.Clients, seconds(r.LastSuccess))
		case 0:
			served = fmt.Sprintf("none of %d served", sc.Clients)
		default:
			served = fmt.Sprintf("%d of %d served", r.Succeeded, sc.Clients)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.2f attempts each, %d of them while down\n",
			r.Strategy.Budget, served, r.PerClient(), r.WhileDown(sc.Outage))
	}
	tw.Flush()
}

// seconds formats d in seconds with two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
