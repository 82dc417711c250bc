#!/usr/bin/env bash
# beside.sh NAME CMD... -- CMD2...: runs CMD in the background, its output
# into a log file, and CMD2 in the foreground; then prints CMD's log whole
# (between two marked lines) and exits non-zero if either failed.
#
# make test runs the field guest (make field) beside the host's unit tests
# and model checks: the field scenario mostly waits on key lifetimes (30 to
# 70 s an event), so on the host's two cores it costs the host phases little
# of their time, and the kernel guest (test-kernel) starts only after both
# ended: never two guests at once.
set -uo pipefail
name=$1
shift
bg=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do bg+=("$1"); shift; done
[ "${1:-}" = -- ] || { echo "usage: $0 NAME CMD... -- CMD2..." >&2; exit 2; }
shift
log=$(mktemp "/tmp/aokeyd-$name.XXXXXX.log")
start=$(date +%s)
"${bg[@]}" >"$log" 2>&1 &
pid=$!
echo "$name: started beside the host's tests (pid $pid, log $log)"
"$@"
rc=$?
wait "$pid"
brc=$?
echo "----- $name (${bg[*]}): its output, $(($(date +%s) - start))s, exit $brc -----"
cat "$log"
echo "----- $name: end of its output -----"
rm -f "$log"
[ "$rc" = 0 ] && [ "$brc" = 0 ]
