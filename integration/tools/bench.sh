#!/usr/bin/env bash
# `make bench`: aokeyd's scale benchmarks in the real TCP-AO kernel (QEMU
# guest), next to a bare setsockopt loop measured in the same run, plus the
# planner's own benchmark on host and guest. Writes report.txt (the table),
# report.png (the chart), results.json, cpu.pprof and the guest console log
# to $AOKEYD_BENCH_OUT (default ./bench-report) and prints the table.
#
# Environment (defaults in brackets):
#   AOKEYD_BENCH_OUT         report directory [./bench-report]
#   AOKEYD_BENCH_SIZES       peer counts N [1024,4096,16384]
#   AOKEYD_BENCH_REPS        repetitions per N [7,4,2]
#   AOKEYD_BENCH_SAMPLE      peers with synchronous deletes [256]
#   AOKEYD_BENCH_PLAN_SIZES  planner sweep fleet sizes [2500,5000,10000,20000]
#   AOKEYD_BENCH_REVOKE      peers of the emergency-revoke run [1000]
#   AOKEYD_BENCH_DAEMON      peers of the daemon RSS/idle-pass run [4096]
#   AOKEYD_BENCH_DAEMON_KEYS keys per peer in the daemon RSS/idle-pass run [4]
#   AOKEYD_BENCH_PASSES      idle reconcile passes the daemon run averages over [5]
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${AOKEYD_BENCH_OUT:-$repo/bench-report}
sizes=${AOKEYD_BENCH_SIZES:-1024,4096,16384}
reps=${AOKEYD_BENCH_REPS:-7,4,2}
sample=${AOKEYD_BENCH_SAMPLE:-256}
plan_sizes=${AOKEYD_BENCH_PLAN_SIZES:-2500,5000,10000,20000}
revoke=${AOKEYD_BENCH_REVOKE:-1000}
daemon=${AOKEYD_BENCH_DAEMON:-4096}
daemon_keys=${AOKEYD_BENCH_DAEMON_KEYS:-4}
passes=${AOKEYD_BENCH_PASSES:-5}

log() { printf 'bench: %s\n' "$*" >&2; }

work=$(mktemp -d /tmp/aokeyd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"

log "building the guest program, aoctl and the rotator test binary (static)"
CGO_ENABLED=0 go build -o "$work/bin/aokeyd-bench" ./internal/bench/cmd/aokeyd-bench
CGO_ENABLED=0 go build -o "$work/bin/aoctl" ./cmd/aoctl
CGO_ENABLED=0 go test -c -o "$work/bin/rotator.test" ./rotator
CGO_ENABLED=0 go test -c -o "$work/bin/daemon.test" ./internal/daemon

log "planner benchmark on the host (rotator BenchmarkPlan)"
go test -run '^$' -bench '^BenchmarkPlan$' -benchmem -count 3 ./rotator | tee "$work/host-plan.txt" >&2
log "idle reconcile pass on the host's CPU (daemon BenchmarkIdlePass)"
go test -run '^$' -bench '^BenchmarkIdlePass$' -count 3 ./internal/daemon | tee "$work/host-idle.txt" >&2

log "booting the TCP-AO guest: N=$sizes, reps=$reps, sync sample $sample, revoke over $revoke peers, daemon with $daemon peers x $daemon_keys keys"
guest_cmd="mkdir -p /aokeyd/share/bench && aokeyd-bench run -out /aokeyd/share/bench -sizes $sizes -reps $reps -sample $sample -plan-sizes $plan_sizes -revoke-peers $revoke -daemon-peers $daemon -daemon-keys $daemon_keys -passes $passes"
guest_cmd="$guest_cmd && (cd rotator && rotator.test -test.run '^\$' -test.bench '^BenchmarkPlan\$' -test.benchmem -test.count 3 >/aokeyd/share/bench/guest-plan.txt) && cat /aokeyd/share/bench/guest-plan.txt"
guest_cmd="$guest_cmd && (cd internal/daemon && daemon.test -test.run '^\$' -test.bench '^BenchmarkIdlePass\$' -test.count 3 >/aokeyd/share/bench/guest-idle.txt) && cat /aokeyd/share/bench/guest-idle.txt"
AOKEYD_VM_OUT="$work/vm" \
	AOKEYD_VM_TIMEOUT=${AOKEYD_VM_TIMEOUT:-1500} \
	AOKEYD_GUEST_BINS="$work/bin/aokeyd-bench $work/bin/aoctl $work/bin/rotator.test $work/bin/daemon.test" \
	AOKEYD_GUEST_CMD="$guest_cmd" \
	bash integration/vm/run.sh

res="$work/vm/bench"
mkdir -p "$out"
go tool pprof -top -nodecount=25 "$work/bin/aokeyd-bench" "$res/cpu.pprof" 2>/dev/null |
	grep -v '^File:\|^Build ID:\|^Type:\|^Time:' >"$work/top.txt" || log "no CPU profile summary"
cp "$res/cpu.pprof" "$out/cpu.pprof"
cp "$res/pass.pprof" "$out/pass.pprof"
go tool pprof -top -cum -nodecount=30 "$work/bin/aokeyd-bench" "$res/pass.pprof" >"$out/pass-top.txt" 2>/dev/null || log "no idle-pass profile summary"
cp "$res/steady.pprof" "$out/steady.pprof"
go tool pprof -top -cum -nodecount=40 "$work/bin/aokeyd-bench" "$res/steady.pprof" >"$out/steady-top.txt" 2>/dev/null || log "no steady-window profile summary"
cp "$res/results.json" "$out/guest-results.json"
cp "$work/vm/console.log" "$out/guest-console.log"
"$work/bin/aokeyd-bench" render -in "$res/results.json" -out "$out" \
	-profile-top "$work/top.txt" -bench "host=$work/host-plan.txt" -bench "guest=$res/guest-plan.txt" \
	-bench "host=$work/host-idle.txt" -bench "guest=$res/guest-idle.txt" \
	-pass-top "$out/pass-top.txt" -steady-top "$out/steady-top.txt"
log "report: $out/report.txt, $out/report.png (raw data: $out/results.json, profile: $out/cpu.pprof)"
