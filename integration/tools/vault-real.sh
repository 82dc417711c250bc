#!/usr/bin/env bash
# make vault-real: the tests against a real HashiCorp Vault. Builds Vault once
# per machine (integration/tools/vault.sh; Vault is a test dependency only,
# BUSL-1.1, never shipped), runs every test of the packages that use
# internal/vaultreal with AOKEYD_REQUIRE_VAULT=1 (a test that would skip for
# want of Vault fails instead), and prints the proof line
#   vault-real: version=V suites=N passed=N sealed_ok=1 soft_delete_ok=1 approle_relogins=R renewals=W
# from what the tests recorded in $AOKEYD_VAULT_REPORT (internal/vaultreal's
# Record) and from go test's own PASS lines: suites are the top-level tests
# that started a real Vault, passed those of them that passed. Nothing in it
# is typed in here. It fails unless every suite passed, sealed and soft
# delete were proven and R and W are at least 1.
#
#   VAULT_REAL_RUN   go test -run pattern (default: every test of the packages)
#   AOKEYD_VAULT     a vault binary to use instead of building one
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
: "${GO:=go}"
if [ -z "${AOKEYD_VAULT:-}" ]; then
	AOKEYD_VAULT=$(integration/tools/vault.sh)
fi
export AOKEYD_VAULT AOKEYD_REQUIRE_VAULT=1
# The packages whose tests call internal/vaultreal: found, not listed;
# but not those that need the TCP-AO kernel (kerneltest): they run in the
# guest VM, with the Vault binary there (make chaos), never on the host.
mapfile -t pkgs < <(comm -23 \
	<(grep -rlF --include='*_test.go' '"github.com/aokeyd/aokeyd/internal/vaultreal"' . | xargs -r -n1 dirname | sort -u) \
	<(grep -rlF --include='*_test.go' '"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"' . | xargs -r -n1 dirname | sort -u))
[ ${#pkgs[@]} -gt 0 ] || { echo "vault-real: no test uses internal/vaultreal" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export AOKEYD_VAULT_REPORT="$work/report"
: >"$AOKEYD_VAULT_REPORT"
rc=0
for p in "${pkgs[@]}"; do
	# The integration module's packages are built from its directory.
	dir=. pkg=$p
	case $p in ./integration/*) dir=integration pkg=./${p#./integration/} ;; esac
	(cd "$dir" && $GO test -count=1 -v -run "${VAULT_REAL_RUN:-.}" "$pkg") >>"$work/test.log" 2>&1 || rc=$?
done
grep -E '^(--- FAIL|FAIL|ok|panic)' "$work/test.log" || true
if [ $rc != 0 ]; then
	echo "vault-real: go test failed; its output:"
	cat "$work/test.log"
fi
r="$AOKEYD_VAULT_REPORT"
suites=$(awk '$1 == "suite" {print $2}' "$r" | sort -u)
n=$(grep -c . <<<"$suites" || true)
passed=0
for s in $suites; do
	grep -qE "^--- PASS: $s \(" "$work/test.log" && passed=$((passed + 1))
done
sum() { awk -v k="$1" '$1 == k {s += $2} END {print s + 0}' "$r"; }
version=$(awk '$1 == "version" {print $2}' "$r" | sort -u | paste -sd, -)
sealed=$(( $(sum sealed_ok) > 0 ? 1 : 0 ))
soft=$(( $(sum soft_delete_ok) > 0 ? 1 : 0 ))
relog=$(sum approle_relogins) renew=$(sum renewals)
echo "vault-real: version=${version:-unknown} suites=$n passed=$passed sealed_ok=$sealed soft_delete_ok=$soft approle_relogins=$relog renewals=$renew"
[ $rc = 0 ] && [ "$n" -gt 0 ] && [ "$passed" = "$n" ] && [ $sealed = 1 ] && [ $soft = 1 ] && [ "$relog" -ge 1 ] && [ "$renew" -ge 1 ]
