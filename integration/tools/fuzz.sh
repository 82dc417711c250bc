#!/usr/bin/env bash
# Runs every Fuzz target in the module: the key-source decoders (keystore,
# outside input from Vault and files) for the given time (default 60s), the
# others for FUZZTIME_OTHER (default 10s) to keep a cached CI run short.
set -euo pipefail
long=${1:-60s}
other=${FUZZTIME_OTHER:-10s}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
n=0
while read -r dir; do
	pkg=./${dir#./}
	t=$other
	case "$pkg" in ./keystore) t=$long ;; esac
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //' | sort -u); do
		echo "fuzz: $pkg $f for $t"
		go test -run='^$' -fuzz="^$f\$" -fuzztime="$t" "$pkg"
		n=$((n + 1))
	done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
echo "fuzz: $n targets ran without a crash (keystore $long, others $other)"
