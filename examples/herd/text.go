package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// barWidth is the width, in characters, of the longest bar.
const barWidth = 50

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
// whole run in at most maxRows buckets.
func bucketWidth(results []*result, maxRows int) time.Duration {
	slots := 0
	for _, r := range results {
		slots = max(slots, len(r.Served))
	}
	end := time.Duration(slots) * slot
	widths := []time.Duration{10, 20, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 30000, 60000}
	for _, w := range widths {
		if w := w * time.Millisecond; end <= w*time.Duration(maxRows) {
			return w
		}
	}
	n := (end + time.Duration(maxRows)*time.Minute - 1) / (time.Duration(maxRows) * time.Minute)
	return n * time.Minute
}

// writeHistograms draws, for each result, one bar per time bucket: its
// served arrivals as █ and its failed ones as ░, on one scale for all.
func writeHistograms(w io.Writer, sc scenario, results []*result) {
	width := bucketWidth(results, 26)
	all := make([][]bucket, len(results))
	most := 1
	for i, r := range results {
		all[i] = buckets(r, width)
		for _, b := range all[i] {
			most = max(most, b.Served+b.Failed)
		}
	}
	fmt.Fprintf(w, "Arrivals at the dependency per %v: █ served, ░ failed (down, or over capacity).\n", width)
	fmt.Fprintf(w, "One character is about %d arrivals. (n in 10 ms): the busiest 10 ms of the row, when over capacity.\n\n",
		(most+barWidth/2)/barWidth)
	for i, r := range results {
		fmt.Fprintf(w, "%s\n", r.Strategy.Name)
		for j, b := range all[i] {
			n := b.Served + b.Failed
			bar := strings.Repeat("█", chars(b.Served, most)) + strings.Repeat("░", chars(b.Failed, most))
			label := ""
			if n > 0 {
				label = fmt.Sprintf(" %d", n)
				if b.Peak > sc.Capacity {
					label += fmt.Sprintf(" (%d in 10 ms)", b.Peak)
				}
			}
			at := time.Duration(j) * width
			state := "    "
			if at < sc.Outage {
				state = "down"
			}
			fmt.Fprintf(w, "%7s %s │%s%s\n", seconds(at), state, bar, label)
		}
		fmt.Fprintln(w)
	}
}

// chars returns the length of a bar for n when most fills barWidth; any
// n > 0 gets at least one character.
func chars(n, most int) int {
	if n <= 0 {
		return 0
	}
	return max(1, (n*barWidth+most/2)/most)
}

// writeTable prints one line of figures per result.
func writeTable(w io.Writer, sc scenario, results []*result) {
	name := 0
	for _, r := range results {
		name = max(name, len(r.Strategy.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tpeak/10ms once up\tattempts\tper client\tall succeeded by\tnever succeeded:\tout of attempts\tbudget refused\t\n", name, "strategy")
	for _, r := range results {
		done := "never"
		if r.Unfinished() == 0 {
			done = seconds(r.LastSuccess)
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%.2f\t%s\t%d\t%d\t%d\t\n", name, r.Strategy.Name,
			r.Peak(sc.Outage), r.Attempts, float64(r.Attempts)/float64(sc.Clients), done,
			r.Unfinished(), r.Exhausted, r.BudgetDenied)
	}
	tw.Flush()
}

// seconds formats d in seconds with two decimals.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
