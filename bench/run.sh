#!/usr/bin/env bash
# Measures the bench module's paths (success, retry, opt-ins, loopback),
# each on realistic answers and on empty ones (bench.Response), each through
# its libraries in interleaved rounds, in CPU time (cmd/measure), takes a CPU
# profile of retryhttp's row of each in-memory path (cmd/profile), runs the
# scenarios (storm, fleet, blip, overload) in fake time, summarises them
# (cmd/report; benchstat, the version pinned in bench/go.mod, for the
# scenarios' runs) and writes BENCHMARKS.md at the repository root. Raw
# results go to bench/results/ (not committed).
#
#   bash bench/run.sh                                 # the full run, about 5 minutes on 2 cores
#   ROUNDS=3 TARGET=10ms COUNT=1 bash bench/run.sh    # a quick look
#
# ROUNDS is the number of rounds of the measured paths, TARGET the CPU time
# of each sample, COUNT the runs of each scenario, PROFILE_CPU the CPU time
# of each of the 6 profiles (sampled 100 times a second; PROFILE_CPU=0
# skips them). The time figures are CPU time, which other processes disturb
# far less than wall-clock time, so the run starts at once; with MAX_LOAD
# set it first waits, up to MAX_WAIT seconds (default 600), for the 1-minute
# load average to fall to MAX_LOAD, checking every 30 s.
set -euo pipefail
cd "$(dirname "$0")"

ROUNDS=${ROUNDS:-60}
TARGET=${TARGET:-40ms}
COUNT=${COUNT:-6}
PROFILE_CPU=${PROFILE_CPU:-3s}
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

build_cmd="go build -o $results/measure ./cmd/measure && go build -o $results/profile ./cmd/profile && go test -c -o $results/bench.test ."
# Every path through every library, ROUNDS times, interleaved.
measure_cmd="$results/measure -rounds $ROUNDS -target $TARGET -o $results/samples.txt"
# A CPU profile of retryhttp's row of each in-memory path, on realistic
# answers, read with go tool pprof -traces: where its time goes.
profile_cmd="rm -rf $results/profiles $results/profiles.txt; $results/profile -cputime $PROFILE_CPU -dir $results/profiles -o $results/profiles.txt"
profile_lines=
if [ "$PROFILE_CPU" != 0 ]; then
	profile_lines="$profile_cmd
go tool pprof -traces -unit=ms $results/profiles/GET_resp=realistic_lib=retryhttp.pprof   # what cmd/profile reads of each profile
"
fi
# The scenarios at full size (go test runs quick variants), in fake time.
scenarios_cmd="rm -f $results/scenarios.txt; $results/bench.test -test.run '^(TestStorm|TestFleet|TestBlip|TestOverload)\$' -test.count $COUNT -scenarios.full -scenarios.out $results/scenarios.txt >$results/scenarios.log"
scenario_libs='retryhttp bare retryhttp-nobudget retryhttp-throttle retryablehttp failsafe-go failsafe-go-budget failsafe-go-breaker rehttp'
# Issue 21's everyday faults through other libraries' budgets, in fake time
# (the root module's TestEverydayFaultsAnchors, about 10 s), for the report's
# section on everyday faults. That section also copies the tables of real
# faults from chaos/README.md, which this script does not rewrite (cd chaos
# && go test -run TestEverydayRealFaults -count=1 -update does).
anchors_cmd="(cd .. && go test -count=1 -run '^TestEverydayFaultsAnchors\$' -faults.anchors -v .) >$results/anchors.txt"
cat >"$results/commands.txt" <<EOF
bash bench/run.sh   # runs what follows and writes BENCHMARKS.md

cd bench
$build_cmd
$measure_cmd
$profile_lines$scenarios_cmd
go tool benchstat -col '/lib@($scenario_libs)' $results/scenarios.txt
$anchors_cmd
EOF

eval "$build_cmd"
echo "== measured paths: $ROUNDS rounds of $TARGET samples" >&2
eval "$measure_cmd"
profiles_flag=
if [ "$PROFILE_CPU" != 0 ]; then
	echo "== CPU profiles of retryhttp's rows: $PROFILE_CPU each" >&2
	eval "$profile_cmd"
	profiles_flag="-profiles $results/profiles.txt"
else
	rm -rf "$results/profiles" "$results/profiles.txt"
fi
echo "== scenarios: storm, fleet, blip, overload" >&2
# A scenario whose checks fail still reports its figures: BENCHMARKS.md is
# written, its targets say "not met", and the script fails at the end.
scenarios_ok=1
eval "$scenarios_cmd" || scenarios_ok=0
echo "== everyday faults through other libraries' budgets (TestEverydayFaultsAnchors)" >&2
# If it fails, the report says which command fills the section's table.
eval "$anchors_cmd" || echo "TestEverydayFaultsAnchors failed: see bench/$results/anchors.txt" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

go tool benchstat -format csv "$results/scenarios.txt" >"$results/scenarios.csv" 2>/dev/null
go tool benchstat -col "/lib@($scenario_libs)" "$results/scenarios.txt" >"$results/benchstat.txt" 2>&1 || true

go list -m -f '{{.Path}} {{.Version}}' \
	github.com/hashicorp/go-retryablehttp github.com/failsafe-go/failsafe-go \
	github.com/PuerkitoBio/rehttp golang.org/x/perf >"$results/versions.txt"
rev=$(git -C .. describe --always --dirty 2>/dev/null || echo unknown)
sed -i "1i github.com/retryhttp/retryhttp $rev (this tree)" "$results/versions.txt"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
go run ./cmd/report \
	-samples "$results/samples.txt" -scenarios "$results/scenarios.csv" $profiles_flag \
	-go "$(go version | sed 's/^go version //')" -cpu "${cpu:-unknown}" -cores "$(nproc)" \
	-load-before "$load_before" -load-after "$load_after" -date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
	-count "$COUNT" -rounds "$ROUNDS" -target "$TARGET" -versions "$results/versions.txt" -commands "$results/commands.txt" \
	-everyday ../chaos/README.md -anchors "$results/anchors.txt" -waiting WAITING.md -fleet FLEET.txt \
	-o ../BENCHMARKS.md
echo "wrote BENCHMARKS.md (samples in bench/$results/samples.txt, CPU profiles in bench/$results/profiles/, the scenarios' benchstat tables in bench/$results/benchstat.txt)" >&2

if [ "$scenarios_ok" = 0 ]; then
	echo "some scenario checks failed: see bench/$results/scenarios.log" >&2
	exit 1
fi
