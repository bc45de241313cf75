#!/usr/bin/env bash
# Writes BENCHMARKS.md at the repository root. It measures the paths through
# every library in interleaved rounds, in CPU time (cmd/measure), runs the
# scenarios in fake time (TestStorm, TestFleet, TestBlip, TestOverload at
# full size), the waiting request (cmd/waiting, which rewrites
# bench/WAITING.md), the core's TestEverydayFaultsAnchors and retryhttp's
# share of a loopback GET's CPU time (attribute.sh, which rewrites
# bench/ATTRIBUTION.md), then writes the report (cmd/report). Raw results
# go to bench/results/ (not committed).
#
#   bash bench/run.sh                      # the full run, about 10 minutes on 2 cores
#   ROUNDS=3 TARGET=10ms COUNT=1 WAITING=0 ATTRIBUTION=0 bash bench/run.sh   # a quick look
#
# ROUNDS is the rounds of the measured paths, TARGET the CPU time of each
# sample, COUNT the runs of each scenario, WAITING_RUNS those of each
# library of the waiting request; WAITING=0 keeps bench/WAITING.md as it
# is, and ATTRIBUTION=0 bench/ATTRIBUTION.md. With MAX_LOAD set it first
# waits, up to MAX_WAIT seconds (default 600), for the 1-minute load
# average to fall to MAX_LOAD.
set -euo pipefail
cd "$(dirname "$0")"

ROUNDS=${ROUNDS:-60}
TARGET=${TARGET:-40ms}
COUNT=${COUNT:-6}
WAITING=${WAITING:-1}
WAITING_RUNS=${WAITING_RUNS:-3}
ATTRIBUTION=${ATTRIBUTION:-1}
MAX_LOAD=${MAX_LOAD:-}
MAX_WAIT=${MAX_WAIT:-600}
results=results
mkdir -p "$results"

load1() { cut -d' ' -f1 /proc/loadavg; }
if [ -n "$MAX_LOAD" ]; then
	waited=0
	while awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }' && [ "$waited" -lt "$MAX_WAIT" ]; do
		echo "load average $(load1) is above $MAX_LOAD; waiting 30 s ($waited s so far)" >&2
		sleep 30
		waited=$((waited + 30))
	done
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rev=$(git -C .. describe --always --dirty 2>/dev/null || echo unknown)

build_cmd="go build -o $results/measure ./cmd/measure && go test -c -o $results/bench.test ."
measure_cmd="$results/measure -rounds $ROUNDS -target $TARGET -o $results/samples.txt"
scenarios_cmd="rm -f $results/scenarios.txt; $results/bench.test -test.run '^(TestStorm|TestFleet|TestBlip|TestOverload)\$' -test.count $COUNT -scenarios.full -scenarios.out $results/scenarios.txt >$results/scenarios.log"
waiting_cmd="go run ./cmd/waiting -runs $WAITING_RUNS -rev $rev -md WAITING.md"
attribution_cmd="bash attribute.sh"
anchors_cmd="(cd .. && go test -count=1 -run '^TestEverydayFaultsAnchors\$' -faults.anchors -v .) >$results/anchors.txt"
report_cmd="go run ./cmd/report -samples $results/samples.txt -scenarios $results/scenarios.txt -waiting WAITING.md -anchors $results/anchors.txt -everyday ../chaos/README.md -fleet FLEET.txt -o ../BENCHMARKS.md"
cat >"$results/commands.txt" <<END
bash bench/run.sh   # runs what follows

cd bench
$build_cmd
$measure_cmd
$scenarios_cmd
go tool benchstat -col /lib $results/scenarios.txt   # the scenarios' figures as benchstat shows them
$waiting_cmd
$anchors_cmd
$attribution_cmd   # rewrites bench/ATTRIBUTION.md
$report_cmd   # with the run's date, machine and settings
END

eval "$build_cmd"
echo "== measured paths: $ROUNDS rounds of $TARGET samples" >&2
eval "$measure_cmd"
echo "== scenarios: storm, fleet, blip, overload" >&2
# A scenario whose checks fail still reports its figures: BENCHMARKS.md is
# written, its targets say "not met", and the script fails at the end.
scenarios_ok=1
eval "$scenarios_cmd" || scenarios_ok=0
# cmd/waiting writes WAITING.md only when every run succeeded; if one fails,
# the report copies WAITING.md as it was (its "Measured:" line says when)
# and the script fails at the end.
waiting_ok=1
if [ "$WAITING" != 0 ]; then
	echo "== waiting request: $WAITING_RUNS runs of each library" >&2
	eval "$waiting_cmd" || waiting_ok=0
fi
echo "== everyday faults through other libraries' budgets (TestEverydayFaultsAnchors)" >&2
# If it fails, the report says which command fills the section's table.
eval "$anchors_cmd" || echo "TestEverydayFaultsAnchors failed: see bench/$results/anchors.txt" >&2
if [ "$ATTRIBUTION" != 0 ]; then
	echo "== retryhttp's own share of a loopback GET's CPU time (attribute.sh)" >&2
	eval "$attribution_cmd"
fi

go list -m -f '{{.Path}} {{.Version}}' github.com/hashicorp/go-retryablehttp github.com/failsafe-go/failsafe-go \
	github.com/PuerkitoBio/rehttp golang.org/x/perf >"$results/modules.txt"
sed -i "1i github.com/retryhttp/retryhttp $rev (this tree)" "$results/modules.txt"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
eval "$report_cmd" -date "'$(date -u '+%Y-%m-%d %H:%M UTC')'" -go "'$(go version | sed 's/^go version //')'" \
	-cpu "'${cpu:-unknown}, $(nproc) cores'" -load "'$load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end'" \
	-rounds "$ROUNDS" -target "$TARGET" -count "$COUNT" -modules "$results/modules.txt" -commands "$results/commands.txt"
echo "wrote BENCHMARKS.md (raw results in bench/$results/)" >&2

if [ "$waiting_ok" = 0 ]; then
	echo "cmd/waiting failed: BENCHMARKS.md copies bench/WAITING.md as it was" >&2
fi
if [ "$scenarios_ok" = 0 ]; then
	echo "some scenario checks failed: see bench/$results/scenarios.log" >&2
fi
[ "$scenarios_ok" = 1 ] && [ "$waiting_ok" = 1 ]
