#!/usr/bin/env bash
# Runs the host model of a fleet roll (internal/daemon BenchmarkFleetRoll)
# on this checkout's work tree and on REF (default HEAD, the last commit),
# side by side in one run: REF is checked out into a scratch work tree and
# gets this checkout's benchmark file, so both run the same measurement.
#
#   integration/tools/roll-compare.sh [REF]
#
# Environment: AOKEYD_ROLL_PEERS (256), AOKEYD_ROLL_COUNT repetitions (3).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
ref=${1:-HEAD}
count=${AOKEYD_ROLL_COUNT:-3}
peers=${AOKEYD_ROLL_PEERS:-256}
tmp=$(mktemp -d /tmp/aokeyd-roll-compare.XXXXXX)
trap 'git -C "$repo" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$repo" worktree add --detach "$tmp/old" "$ref" >/dev/null 2>&1
cp "$repo/internal/daemon/fleetroll_bench_test.go" "$tmp/old/internal/daemon/"
run() { (cd "$1" && AOKEYD_ROLL_PEERS=$peers go test -run '^$' -bench '^BenchmarkFleetRoll$' -benchtime 1x -count 1 ./internal/daemon/ | grep '^BenchmarkFleetRoll'); }
echo "BenchmarkFleetRoll, N=$peers, $count rounds alternating (old: $(git -C "$repo" rev-parse --short "$ref"), new: this checkout's work tree)"
for i in $(seq "$count"); do
	echo "old $(run "$tmp/old")"
	echo "new $(run "$repo")"
done
