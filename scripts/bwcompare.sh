#!/usr/bin/env bash
# bwcompare.sh alternates ingot's bandwidth probe (scripts/bwprobe) with plain C
# read loops (scripts/bwloop.c: plain, avx2, avx512) in the same minutes. Each
# run times `passes` passes over MiB MiB; the order of the tools is reversed
# every other round. It prints each run's median and best pass, then per thread
# count and tool the median of the runs' medians and of their best passes, with
# ranges, and the probe's paired ratio to the best C loop of the same round
# (median and range over rounds). With BWCOMPARE_BASE set to a bwprobe binary
# built from another commit, that runs too, as "base".
#
#	scripts/bwcompare.sh [rounds=10] [MiB=1024] [threads="1 2"] [passes=5]
set -euo pipefail
rounds=${1:-10}
mib=${2:-1024}
threads=${3:-1 2}
passes=${4:-5}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O3 -march=native -pthread -o "$tmp/bwloop" scripts/bwloop.c
CGO_ENABLED=0 go build -o "$tmp/bwprobe" ./scripts/bwprobe
tools=(probe plain avx2 avx512)
if [ -n "${BWCOMPARE_BASE:-}" ]; then
	tools+=(base)
fi
for ((r = 1; r <= rounds; r++)); do
	order=("${tools[@]}")
	if ((r % 2 == 0)); then
		order=()
		for ((i = ${#tools[@]} - 1; i >= 0; i--)); do
			order+=("${tools[i]}")
		done
	fi
	for t in $threads; do
		for k in "${order[@]}"; do
			case $k in
			probe) line=$("$tmp/bwprobe" -t "$t" -m "$mib" -p "$passes") ;;
			base) line=$("$BWCOMPARE_BASE" -t "$t" -m "$mib" -p "$passes") ;;
			*) line=$("$tmp/bwloop" -t "$t" -m "$mib" -p "$passes" -k "$k") ;;
			esac
			# the passes' GB/s lie between "GB/s:" and "median"
			best=$(echo "$line" | sed 's/.*GB\/s://; s/median.*//' | tr ' ' '\n' | sort -n | tail -1)
			echo "round $r threads $t $k median ${line##* } best $best" | tee -a "$tmp/all"
		done
	done
done
echo "== GB/s over $mib MiB, $passes passes a run, $rounds rounds, ended $(date -u +%FT%TZ)"
echo "== per tool: median of the runs' medians [range]; median of the runs' best passes [range]"
stat() { sort -n | awk '{ x[NR] = $1 } END { printf "%.2f [%.2f–%.2f]", (NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2), x[1], x[NR] }'; }
for t in $threads; do
	for k in "${tools[@]}"; do
		med=$(awk -v t="$t" -v k="$k" '$4 == t && $5 == k { print $7 }' "$tmp/all" | stat)
		best=$(awk -v t="$t" -v k="$k" '$4 == t && $5 == k { print $9 }' "$tmp/all" | stat)
		printf "threads %s %-7s %s; best %s\n" "$t" "$k" "$med" "$best"
	done
	ratio=$(awk -v t="$t" '$4 == t { m[$2, $5] = $7; b[$2, $5] = $9; if ($2 > n) n = $2 }
		END { for (r = 1; r <= n; r++) { c = m[r, "plain"]; if (m[r, "avx2"] > c) c = m[r, "avx2"]; if (m[r, "avx512"] > c) c = m[r, "avx512"]; print m[r, "probe"] / c } }' "$tmp/all" | stat)
	bratio=$(awk -v t="$t" '$4 == t { b[$2, $5] = $9; if ($2 > n) n = $2 }
		END { for (r = 1; r <= n; r++) { c = b[r, "plain"]; if (b[r, "avx2"] > c) c = b[r, "avx2"]; if (b[r, "avx512"] > c) c = b[r, "avx512"]; print b[r, "probe"] / c } }' "$tmp/all" | stat)
	echo "threads $t probe ÷ best C loop of its round: medians $ratio; best passes $bratio"
done
