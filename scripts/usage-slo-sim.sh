#!/usr/bin/env bash
# usage_balance against rebalance alone at scale, in the simulator: `shoal sim usage-slo` (two
# tenants, one cached and one that misses; scenario in sim/scenario.go) at each node count of NODES
# and each seed of SEEDS, each run with usage_balance on and off (rebalance on in both). Prints,
# per node count and arm, the reads/s served at the SLO (the last ramp step before the first that
# missed p99 ≤ 25 ms or 99 % served) as median [min, max] over the seeds, and the gain of
# usage_balance at equal nodes. Every run's report.json (steps, placement per step) and decision
# logs are under OUT/n<nodes>-s<seed>.
#
#   scripts/usage-slo-sim.sh                          # 30 and 40 nodes, seeds 1-3
#   NODES="30 40 50 60" scripts/usage-slo-sim.sh      # how many nodes rebalance alone needs
#
# Needs jq. Each run is a few seconds of CPU.
set -euo pipefail

BIN=$(readlink -f "${BIN:-bin/shoal}")
OUT=${OUT:-/tmp/usage-slo-sim}
NODES=${NODES:-30 40}
SEEDS=${SEEDS:-1 2 3}
mkdir -p "$OUT"

# stats prints "median [min, max]" of its arguments.
stats() {
	printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {m = (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
		printf "%.0f [%.0f, %.0f]", m, v[1], v[NR]}'
}

printf '%-6s %-28s %-28s %s\n' nodes "usage_balance on (reads/s)" "rebalance alone (reads/s)" "gain, median [min, max]"
for n in $NODES; do
	on=() off=() gain=()
	for s in $SEEDS; do
		dir=$OUT/n$n-s$s
		"$BIN" sim usage-slo --nodes "$n" --seed "$s" --out "$dir" >"$dir.txt" 2>/dev/null
		a=$(jq '.runs[] | select(.policy_on) | .at_slo.served_ops_per_s' "$dir/report.json")
		b=$(jq '.runs[] | select(.policy_on | not) | .at_slo.served_ops_per_s' "$dir/report.json")
		on+=("$a") off+=("$b")
		gain+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print (b > 0) ? 100 * (a - b) / b : 0}')")
	done
	printf '%-6s %-28s %-28s %s %%\n' "$n" "$(stats "${on[@]}")" "$(stats "${off[@]}")" "$(stats "${gain[@]}")"
done
echo "reports: $OUT/n<nodes>-s<seed>/report.json"
