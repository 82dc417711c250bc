#!/usr/bin/env bash
# make model-traces: regenerates rotator/testdata/model-traces.txt.gz, the
# spin random simulations of rotator/model/roll.pml (seeds 1..MODEL_TRACES,
# at most MODEL_TRACE_STEPS steps each) that rotator's replay test runs
# against the real roll machine. Each trace is "TRACE seed", then the
# model's EV/CRASHAT/ST lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${MODEL_TRACES:-300}
steps=${MODEL_TRACE_STEPS:-1500}
command -v spin >/dev/null || { echo "model-traces: spin is not installed (make deps)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp rotator/model/*.pml "$work"/
for seed in $(seq 1 "$n"); do
	echo "TRACE $seed"
	(cd "$work" && spin -n"$seed" -u"$steps" roll.pml) | sed -n 's/^[[:space:]]*\(EV .*\|CRASHAT .*\|ST .*\)$/\1/p'
done | gzip -9n >rotator/testdata/model-traces.txt.gz
echo "model-traces: $n traces in rotator/testdata/model-traces.txt.gz ($(stat -c %s rotator/testdata/model-traces.txt.gz) bytes)"
