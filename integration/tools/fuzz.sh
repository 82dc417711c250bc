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
set -euo pipefail
long=${1:-60s}
other=${FUZZTIME_OTHER:-10s}
minimize=${FUZZMINIMIZETIME:-1s}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
n=0
while read -r dir; do
	pkg=./${dir#./}
	t=$other
	case "$pkg" in ./keystore) t=$long ;; esac
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		echo "fuzz: $pkg $f for $t"
		go test -run='^$' -fuzz="^$f\$" -fuzztime="$t" -fuzzminimizetime="$minimize" "$pkg"
		n=$((n + 1))
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
echo "fuzz: $n targets ran without a crash (keystore $long, others $other, minimisation at most $minimize per input)"
