#!/usr/bin/env bash
# Writes bench/ATTRIBUTION.md: the share of a loopback GET's CPU time that
# retryhttp's own code takes, read from a CPU profile of the GETs through
# retryhttp (BenchmarkLoopback, lib=retryhttp): the samples inside
# retryhttp's Transport.RoundTrip but outside the base's RoundTrip
# (net/http's), over all the process's samples (the server's included, as
# in BENCHMARKS.md's loopback tables). A profile compares the library with
# nothing but itself, so the harness's error between two cases (see
# bare-again in BENCHMARKS.md) does not enter it; what it leaves out is what
# the library makes others do, and a GET through retryhttp allocates
# nothing that bare's does not (the tables' allocs/req).
#
#   bash bench/attribute.sh            # about 2 minutes on 2 cores
#   N=20000 bash bench/attribute.sh    # a quick look
set -euo pipefail
cd "$(dirname "$0")"

N=${N:-200000}
results=results
mkdir -p "$results"
go test -c -o "$results/bench.test" .
rev=$(git -C .. describe --always --dirty 2>/dev/null || echo unknown)

rows=""
for proto in h1 h2; do
	for callers in 1 16 64; do
		prof="$results/attribution-$proto-$callers.prof"
		"$results/bench.test" -test.run '^$' -test.benchtime "${N}x" -test.cpuprofile "$prof" \
			-test.bench "^BenchmarkLoopback/proto=$proto/callers=$callers/lib=retryhttp\$" >/dev/null
		total=$(go tool pprof -top -unit=ms -nodecount=1 "$prof" 2>/dev/null |
			sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p')
		own=$(go tool pprof -top -cum -unit=ms -nodecount=100000 \
			-focus 'retryhttp\.\(\*Transport\)\.RoundTrip$' -ignore 'net/http\.\(\*Transport\)\.RoundTrip$' \
			"$prof" 2>/dev/null | awk '$6 == "github.com/retryhttp/retryhttp.(*Transport).RoundTrip" { sub("ms", "", $4); print $4 }')
		own=${own:-0}
		share=$(awk -v o="$own" -v t="$total" 'BEGIN { printf "%.2f", 100 * o / t }')
		per=$(awk -v o="$own" -v n="$N" 'BEGIN { printf "%.2f", 1000 * o / n }')
		echo "$proto, $callers callers: $own ms of $total ms, $share %" >&2
		rows+="| $proto | $callers | $N | $total ms | $own ms | $share % | $per µs |"$'\n'
	done
done

cat >ATTRIBUTION.md <<END
# What retryhttp's own code costs a loopback GET

<!-- Written by bench/attribute.sh; edit it, not this file. -->

GETs through retryhttp (default policy and budget) to the loopback server of BENCHMARKS.md's
loopback tables, under a CPU profile (pprof, 100 samples a second per thread busy). *own* is
the samples inside retryhttp's \`Transport.RoundTrip\` but outside the base's (net/http's)
\`RoundTrip\`; *share* is that over all the process's samples, the server's included, as the
tables' CPU time is. The target is a share under 3 %.

Measured: $(date -u '+%Y-%m-%d %H:%M UTC'), $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH), $(nproc) CPUs, retryhttp $rev.

| protocol | callers | GETs | all samples | own | share | own per GET |
|---|---:|---:|---:|---:|---:|---:|
${rows}
A sample is 10 ms, so *own* is a count of some tens of samples: read a share to about a
fifth of itself. It leaves out what the library makes other code do (a GET through retryhttp
allocates nothing more than bare's, so no garbage collection of its own), and counts what the
runtime did on the library's behalf inside its frames (a preemption landing there).

## Reproduce

\`\`\`
bash bench/attribute.sh
\`\`\`
END
echo "wrote bench/ATTRIBUTION.md" >&2
