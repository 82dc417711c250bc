#!/usr/bin/env bash
# make chaos / make chaos-mutant: the fleet under chaos (integration/e2e
# TestChaos) in the guest, alone, for CHAOS (a Go duration, default 60m).
#
#   CHAOS=60m CHAOS_SEED=S bash integration/tools/chaos.sh          a run (S replays one)
#   bash integration/tools/chaos.sh mutant                           the checker's own proof
#
# mutant builds aokeyd with the tag aokeyd_mutant_revoke_skips_listener
# (revoked keys stay on the listening sockets) and runs a short schedule of
# revokes, fleet revokes and aokeyd kills: the run must FAIL, on the
# revoked-left invariant. It prints "chaos-mutant: caught by revoked-left"
# and exits 0 only then.
#
# A run's fleet uses real HashiCorp Vault (integration/tools/vault.sh, built
# once per machine; a test dependency only, never shipped) with raft
# storage, so that it can be sealed and restarted, behind a fault proxy for
# the slow answers and 500s (internal/vaultreal/faultproxy); the log's
# "chaos: vault=V (real)" line names it. The mutant run keeps the test
# server: its schedule has no Vault fault, and it proves the checker.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
mode=${1:-run}
chaos=${CHAOS:-60m}
# The guest's time limit: the run, its fleet's setup and final checks,
# and the boot, with room to spare.
secs=$(go run ./integration/tools/durationsecs "$chaos")
env=(AOKEYD_CHAOS="$chaos")
[ -n "${CHAOS_SEED:-}" ] && env+=(AOKEYD_CHAOS_SEED="$CHAOS_SEED")
[ -n "${CHAOS_KINDS:-}" ] && env+=(AOKEYD_CHAOS_KINDS="$CHAOS_KINDS")
if [ "$mode" = mutant ]; then
	export AOKEYD_BUILD_TAGS=aokeyd_mutant_revoke_skips_listener
	env=(AOKEYD_CHAOS="${CHAOS_MUTANT:-3m}" AOKEYD_CHAOS_KINDS=revoke,fleet-revoke,aokeyd-kill ${CHAOS_SEED:+AOKEYD_CHAOS_SEED=$CHAOS_SEED})
	secs=600
fi
vault=1
if [ "$mode" = mutant ]; then
	vault=0
else
	env+=(AOKEYD_VAULT=vault AOKEYD_REQUIRE_VAULT=1)
fi
bins=$(AOKEYD_GUEST_VAULT=$vault bash integration/tools/guest-bins.sh)
out=$(mktemp /tmp/aokeyd-chaos.XXXXXX.log)
set +e
# Vault's 139 MB binary (copied to the guest's tmpfs) and its ~220 MB
# resident want room beside the fleet.
AOKEYD_GUEST_ENV="${env[*]}" AOKEYD_TEST_RUN='^TestChaos$' AOKEYD_VM_TIMEOUT=$((secs + 900)) AOKEYD_VM_MEM=${AOKEYD_VM_MEM:-$((2048 + vault * 1024))} \
	AOKEYD_TEST_TIMEOUT="$((secs + 800))s" AOKEYD_GUEST_BINS="$bins" bash integration/vm/run.sh ./integration/e2e 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
if [ "$mode" != mutant ]; then
	exit "$rc"
fi
if [ "$rc" != 0 ] && grep -q 'revoked-left at ' "$out" && grep -Eq '^chaos: .* revoked_left=[1-9]' "$out"; then
	echo "chaos-mutant: caught by revoked-left ($(grep -E '^chaos: ' "$out" | tail -1))"
	exit 0
fi
echo "chaos-mutant: the broken aokeyd was NOT caught (exit $rc); see $out"
exit 1
