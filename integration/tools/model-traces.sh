#!/usr/bin/env bash
# make model-traces: regenerates rotator/testdata/model-traces.txt.gz, the
# spin random simulations of rotator/model/roll.pml (seeds 1..MODEL_TRACES,
# at most MODEL_TRACE_STEPS steps each) that rotator's replay test runs
# against the real roll machine, then the witnesses: for each state
# roll.pml names W_* that the random simulations rarely reach (edits in
# place taking effect), the shortest path to it (a breadth-first search
# with the budgets given, which stops at it), as trace 1001, 1002, ...
# Each trace is "TRACE seed", then the model's EV/CRASHAT/ST lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${MODEL_TRACES:-300}
steps=${MODEL_TRACE_STEPS:-1500}
command -v spin >/dev/null || { echo "model-traces: spin is not installed (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp rotator/model/*.pml "$work"/
# witness NAME FLAGS: the shortest path to roll.pml's state NAME.
witness() {
	local f="-DWITNESS=$1 $2"
	# shellcheck disable=SC2086
	(cd "$work" && spin $f -a roll.pml >/dev/null && cc -O2 -w -DBFS -DNOCLAIM -DMEMLIM=4096 -o pan pan.c && ./pan >pan.out 2>&1) || true
	grep -q 'errors: 1' "$work/pan.out" || { echo "model-traces: witness $1 not reached" >&2; exit 1; }
	# shellcheck disable=SC2086
	(cd "$work" && spin -t $f roll.pml) | sed -n 's/^[[:space:]]*\(EV .*\|CRASHAT .*\|ST .*\)$/\1/p'
}
few="-DCRASHES=0 -DLOSSES=0 -DTIMEOUTS=0 -DLOSTRECORDS=0"
{
	for seed in $(seq 1 "$n"); do
		echo "TRACE $seed"
		(cd "$work" && spin -n"$seed" -u"$steps" roll.pml) | sed -n 's/^[[:space:]]*\(EV .*\|CRASHAT .*\|ST .*\)$/\1/p'
	done
	w=1000
	for x in "W_LISTENER_EDIT:$few" "W_SESSION_EDIT:$few" "W_ACCEPTED_EDIT:$few -DRECONNECTS=2" "W_STALE_EDIT:$few"; do
		w=$((w + 1))
		echo "TRACE $w"
		witness "${x%%:*}" "${x#*:}"
	done
} | gzip -9n >rotator/testdata/model-traces.txt.gz
echo "model-traces: $n traces and 4 witnesses in rotator/testdata/model-traces.txt.gz ($(stat -c %s rotator/testdata/model-traces.txt.gz) bytes)"
