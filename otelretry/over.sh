#!/usr/bin/env bash
# over.sh measures what otelretry costs beyond otelhttp alone: it runs
# BenchmarkOverOtelhttp in rounds, each implementation in a process of its
# own and their order alternating from round to round, so that neither
# runs in the other's wake (its heap, its collector's pace), and prints per
# base the median CPU time per request of each and the median of the
# per-round ratios, with their middle half.
#
#	bash over.sh                  # 20 rounds over memory, 12 over loopback
#	ROUNDS=10 BASES=memory bash over.sh
#
# The benchmark lines go to $OUT (default: a temporary file, named at the
# end), which benchstat reads too: benchstat -col /impl "$OUT".
set -euo pipefail
cd "$(dirname "$0")"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/otelretry.test
go test -c -o "$bin" .
out=${OUT:-$(mktemp)}
: >"$out"

for base in ${BASES:-memory loopback}; do
	rounds=${ROUNDS:-20}
	n=60000x
	if [ "$base" = loopback ]; then
		rounds=${ROUNDS:-12}
		n=30000x
	fi
	for i in $(seq "$rounds"); do
		order="otelhttp otelretry"
		if ((i % 2 == 0)); then
			order="otelretry otelhttp"
		fi
		for impl in $order; do
			"$bin" -test.run '^$' -test.bench "OverOtelhttp/base=$base/impl=$impl\$" \
				-test.cpu 1 -test.benchtime "$n" | grep '^Benchmark' | sed "s/^/round=$i /" >>"$out"
		done
	done
done

# Per base: the medians of each implementation's CPU time per request, and
# of the per-round ratios otelretry/otelhttp with their quartiles.
awk '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	split($2, p, "/"); base = p[2]; impl = p[3]; sub(/-[0-9]+$/, "", impl)
	for (k = 3; k <= NF; k++) if ($k == "cpu-ns/op") cpu = $(k - 1)
	for (k = 3; k <= NF; k++) if ($k == "B/op") bytes[base, impl] = $(k - 1)
	for (k = 3; k <= NF; k++) if ($k == "allocs/op") allocs[base, impl] = $(k - 1)
	v[base, impl, $1] = cpu
	if (!(base in seen)) { seen[base] = 1; bases[++nb] = base }
	if (!((base, $1) in rseen)) { rseen[base, $1] = 1; rounds[base, ++nr[base]] = $1 }
}
END {
	for (b = 1; b <= nb; b++) {
		base = bases[b]; n = 0
		for (r = 1; r <= nr[base]; r++) {
			id = rounds[base, r]
			if (!((base, "impl=otelhttp", id) in v) || !((base, "impl=otelretry", id) in v)) continue
			n++; h[n] = v[base, "impl=otelhttp", id]; o[n] = v[base, "impl=otelretry", id]; q[n] = o[n] / h[n]
		}
		mh = median(h, n); mo = median(o, n); mq = median(q, n)
		printf "%s, %d rounds: otelhttp %.0f cpu-ns/op, %s B, %s allocs; otelretry %.0f cpu-ns/op, %s B, %s allocs\n",
			base, n, mh, bytes[base, "impl=otelhttp"], allocs[base, "impl=otelhttp"],
			mo, bytes[base, "impl=otelretry"], allocs[base, "impl=otelretry"]
		printf "  otelretry/otelhttp per round: median %.3f, middle half %.3f to %.3f\n", mq, q[int(n / 4) + 1], q[n - int(n / 4)]
	}
}' "$out"
echo "benchmark lines: $out"
