package main

import (
	"fmt"
	"testing"
	"time"
)

func TestZZHelperDebug(t *testing.T) {
	sc := small()
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		fmt.Println(name, b.Attempts, b.PerClient(), "down", b.WhileDown(sc.Outage), "last", b.LastSuccess, "peak", b.Peak(sc.Outage), "refused", b.BudgetRefusals, "waits", b.BudgetWaits, "none", r[name].PerClient())
		as := retryArrivals(b)
		first := 0
		for c, run := range b.Clients {
			if run.Arrivals[0] < b.Clients[first].Arrivals[0] {
				first = c
			}
		}
		fmt.Println(" first", b.Clients[first].Arrivals)
		type k struct{ s, f, late int }
		m := map[time.Duration]*k{}
		var order []time.Duration
		for _, a := range as {
			if m[a.at] == nil {
				m[a.at] = &k{}
				order = append(order, a.at)
			}
			if a.served {
				m[a.at].s++
			} else {
				m[a.at].f++
			}
			if a.attempt > 2 {
				m[a.at].late++
			}
		}
		for i, at := range order {
			if i < 60 {
				fmt.Printf("  %v %+v\n", at, *m[at])
			}
		}
	}
}
