#!/usr/bin/env bash
# Runs the benchmarks of the bench module and the budget scenarios (storm,
# fleet, blip), summarises them with benchstat (the version pinned in
# bench/go.mod) and writes BENCHMARKS.md at the repository root. Raw results
# go to bench/results/ (not committed).
#
#   bash bench/run.sh                 # the full run, about 4 minutes on 2 cores
#   COUNT=1 BENCHTIME=100ms bash bench/run.sh   # a quick look (no confidence intervals)
#
# Before it starts, it waits up to MAX_WAIT seconds (default 900) for the
# 1-minute load average to be at most MAX_LOAD (default 1.5), checking every
# minute, since other processes on the machine disturb the time figures.
set -euo pipefail
cd "$(dirname "$0")"

COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
MAX_LOAD=${MAX_LOAD:-1.5}
MAX_WAIT=${MAX_WAIT:-900}
results=results
mkdir -p "$results"

load1() { cut -d' ' -f1 /proc/loadavg; }
waited=0
while awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }' && [ "$waited" -lt "$MAX_WAIT" ]; do
	echo "load average $(load1) is above $MAX_LOAD; waiting a minute ($waited s so far)" >&2
	sleep 60
	waited=$((waited + 60))
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# One test binary, run COUNT times over all the benchmarks, so that each
# library's runs are spread over the whole run instead of bunched together
# while the machine's load drifts.
build_cmd="go test -c -o $results/bench.test ."
bench_cmd="for i in \$(seq $COUNT); do $results/bench.test -test.run '^\$' -test.bench . -test.benchmem -test.benchtime $BENCHTIME; done > $results/bench.txt"
# The scenarios at full size (go test runs quick variants), in fake time.
scenarios_cmd="rm -f $results/scenarios.txt; $results/bench.test -test.run '^(TestStorm|TestFleet|TestBlip)\$' -test.count $COUNT -scenarios.full -scenarios.out $results/scenarios.txt >$results/scenarios.log"
cat >"$results/commands.txt" <<EOF
bash bench/run.sh   # runs what follows, then writes BENCHMARKS.md

cd bench
$build_cmd
$bench_cmd
$scenarios_cmd
go tool benchstat -col '/lib@(retryhttp bare retryablehttp failsafe-go rehttp)' $results/bench.txt
go tool benchstat -col '/lib@(retryhttp bare retryhttp-nobudget retryablehttp failsafe-go failsafe-go-budget rehttp)' $results/scenarios.txt
EOF

eval "$build_cmd"
echo "== benchmarks: $COUNT rounds" >&2
eval "$bench_cmd"
echo "== budget scenarios: storm, fleet, blip" >&2
# A scenario whose checks fail still reports its figures: BENCHMARKS.md is
# written, its targets say "not met", and the script fails at the end.
scenarios_ok=1
eval "$scenarios_cmd" || scenarios_ok=0
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

go tool benchstat -format csv "$results/bench.txt" >"$results/bench.csv" 2>/dev/null
go tool benchstat -format csv "$results/scenarios.txt" >"$results/scenarios.csv" 2>/dev/null
{ go tool benchstat -col '/lib@(retryhttp bare retryablehttp failsafe-go rehttp)' "$results/bench.txt"; go tool benchstat -col '/lib@(retryhttp bare retryhttp-nobudget retryablehttp failsafe-go failsafe-go-budget rehttp)' "$results/scenarios.txt"; } >"$results/benchstat.txt" 2>&1 || true

go list -m -f '{{.Path}} {{.Version}}' \
	github.com/hashicorp/go-retryablehttp github.com/failsafe-go/failsafe-go \
	github.com/PuerkitoBio/rehttp golang.org/x/perf >"$results/versions.txt"
rev=$(git -C .. describe --always --dirty 2>/dev/null || echo unknown)
sed -i "1i github.com/retryhttp/retryhttp $rev (this tree)" "$results/versions.txt"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
go run ./cmd/report \
	-bench "$results/bench.csv" -scenarios "$results/scenarios.csv" \
	-go "$(go version | sed 's/^go version //')" -cpu "${cpu:-unknown}" -cores "$(nproc)" \
	-load-before "$load_before" -load-after "$load_after" -date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
	-count "$COUNT" -versions "$results/versions.txt" -commands "$results/commands.txt" \
	-o ../BENCHMARKS.md
echo "wrote BENCHMARKS.md (benchstat tables in bench/$results/benchstat.txt)" >&2

# Hedged requests against a heavy-tailed loopback server, in real time
# (about 2.5 minutes): writes bench/HEDGING.md and bench/hedging.svg.
# HEDGING=0 skips it.
if [ "${HEDGING:-1}" != 0 ]; then
	echo "== hedging" >&2
	go run ./cmd/hedging -md HEDGING.md -svg hedging.svg
fi

if [ "$scenarios_ok" = 0 ]; then
	echo "some scenario checks failed: see bench/$results/scenarios.log" >&2
	exit 1
fi
