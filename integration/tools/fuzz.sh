#!/usr/bin/env bash
# Runs every Fuzz target in the module: the key-source decoders (keystore,
# outside input from Vault and files) for the given time (default 60s), the
# others for FUZZTIME_OTHER (default 10s) to keep a cached CI run short.
#
# Each new interesting input is minimised before the worker fuzzes on, for
# up to -fuzzminimizetime, which is 60s by default: a 10s run then spends
# nearly all its time minimising (the policy parser ran 40 inputs in 10s).
# FUZZMINIMIZETIME (default 1s) bounds it, crashers included: a crasher
# is still written to testdata/fuzz, only perhaps less small.
#
# Go before 1.27 can fail a target at the -fuzztime boundary with a bare
# "context deadline exceeded" (golang/go#75804: the coordinator's deadline
# races a worker's shutdown; fixed in Go 1.27, this module builds with
# 1.26). Such a run wrote no failing input and printed no panic or test
# failure: it runs once more, and fails if it fails again. Any other
# failure fails at once.
set -euo pipefail
long=${1:-60s}
other=${FUZZTIME_OTHER:-10s}
minimize=${FUZZMINIMIZETIME:-1s}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
fuzz_one() { go test -run='^$' -fuzz="^$1\$" -fuzztime="$2" -fuzzminimizetime="$minimize" "$3"; }
n=0
while read -r dir; do
	pkg=./${dir#./}
	t=$other
	case "$pkg" in ./keystore) t=$long ;; esac
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		echo "fuzz: $pkg $f for $t"
		log=$(mktemp)
		if ! fuzz_one "$f" "$t" "$pkg" 2>&1 | tee "$log"; then
			if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
				echo "fuzz: $pkg $f stopped at the -fuzztime boundary with no failing input (golang/go#75804, fixed in Go 1.27): once more"
				fuzz_one "$f" "$t" "$pkg" || { rm -f "$log"; exit 1; }
			else
				rm -f "$log"
				exit 1
			fi
		fi
		rm -f "$log"
		n=$((n + 1))
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
echo "fuzz: $n targets ran without a crash (keystore $long, others $other, minimisation at most $minimize per input)"
