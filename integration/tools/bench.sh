#!/usr/bin/env bash
# `make bench`: aokeyd's scale benchmarks in the real TCP-AO kernel (QEMU
# guest), next to a bare setsockopt loop measured in the same run, plus the
# planner's own benchmark on host and guest. Writes report.txt (the table),
# report.png (the chart), report.tsv (the chart's figures and the memory
# and drain figures, tab-separated: item, n, series, value, unit, runs),
# results.json, cpu.pprof, heap.pprof (the daemon item's heap where its
# memory is measured; heap-top.txt its top, and heap-before*.* with
# AOKEYD_BENCH_BEFORE) and the guest console log to $AOKEYD_BENCH_OUT
# (default ./bench-report) and prints the table. The guest program (aokeyd-bench)
# measures; the host's aokeyd-bench-report draws the report.
#
# Environment (defaults in brackets):
#   AOKEYD_BENCH_OUT         report directory [./bench-report]
#   AOKEYD_BENCH_SIZES       peer counts N [1024,4096,16384]
#   AOKEYD_BENCH_REPS        repetitions per N [7,4,2]
#   AOKEYD_BENCH_SAMPLE      peers with synchronous deletes [256]
#   AOKEYD_BENCH_TURNS       rotations the raw loop and aokeyd take in turns
#                            on one listener at the largest N (item 2's
#                            kernel time) [8]
#   AOKEYD_BENCH_PLAN_SIZES  planner sweep fleet sizes [2500,5000,10000,20000]
#   AOKEYD_BENCH_REVOKE      peers of the emergency-revoke run [1000]
#   AOKEYD_BENCH_DAEMON      peers of the daemon RSS/idle-pass run [4096]
#   AOKEYD_BENCH_DAEMON_KEYS keys per peer in the daemon RSS/idle-pass run [4]
#   AOKEYD_BENCH_PASSES      idle reconcile passes the daemon run averages over [5]
#   AOKEYD_BENCH_FLEET_SIZES real-speaker fleet sizes N: gobgpd v3.37 with N
#                            TCP-AO neighbours, BIRD 2.17 with N protocols,
#                            the aokeyd binary (integration/speakerbench); "off"
#                            skips the item [64,256,512,1024]
#   AOKEYD_BENCH_BIRDFLEET_SIZES route-server sizes N of the bird-fleet item:
#                            BIRD 2.17 as a route server with N BGP
#                            protocols, keyed by aokeyd's native BIRD
#                            executor (speaker type bird: an include file
#                            per member), the members one BIRD with N
#                            protocols keyed statically; a scheduled roll
#                            of every member and a revoke of one key
#                            across all (integration/speakerbench,
#                            TestBirdFleet); "off" skips the item [1000]
#   AOKEYD_BENCH_FLEET_FORCE 1: roll every fleet size, also one above 256
#                            the guest does not hold (see
#                            integration/speakerbench's doc) [0]
#   AOKEYD_BENCH_FLEET_PROFILE 1 (or cpu): the real-speaker item's aokeyd
#                            writes a CPU profile of each fleet roll and
#                            revoke; trace: an execution trace of each (the
#                            recorder's work is then in its figures, and
#                            only in this binary's, not the before
#                            binary's) [0]
#   AOKEYD_BENCH_FLEET_BEFORE a directory with an older aokeyd and aoctl
#                            (e.g. the main before a change): the
#                            real-speaker item runs once more with them, at
#                            AOKEYD_BENCH_FLEET_BEFORE_SIZES [64], and the
#                            report shows both sets of fleet: lines
#   AOKEYD_BENCH_BEFORE      a directory with an older aokeyd-bench and
#                            daemon.test (built static from the main before a
#                            change): in the same guest boot, right after the
#                            current ones, they run with the same parameters,
#                            and the report prints their table below this
#                            one's (before-prog/report.txt)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${AOKEYD_BENCH_OUT:-$repo/bench-report}
sizes=${AOKEYD_BENCH_SIZES:-1024,4096,16384}
reps=${AOKEYD_BENCH_REPS:-7,4,2}
sample=${AOKEYD_BENCH_SAMPLE:-256}
turns=${AOKEYD_BENCH_TURNS:-8}
plan_sizes=${AOKEYD_BENCH_PLAN_SIZES:-2500,5000,10000,20000}
revoke=${AOKEYD_BENCH_REVOKE:-1000}
daemon=${AOKEYD_BENCH_DAEMON:-4096}
daemon_keys=${AOKEYD_BENCH_DAEMON_KEYS:-4}
passes=${AOKEYD_BENCH_PASSES:-5}
fleet=${AOKEYD_BENCH_FLEET_SIZES:-64,256,512,1024}
birdfleet=${AOKEYD_BENCH_BIRDFLEET_SIZES:-1000}

log() { printf 'bench: %s\n' "$*" >&2; }

work=$(mktemp -d /tmp/aokeyd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"

log "building the guest program, aoctl and the rotator test binary (static), and the host's report program"
CGO_ENABLED=0 go build -o "$work/bin/aokeyd-bench" ./integration/bench/cmd/aokeyd-bench
go build -o "$work/aokeyd-bench-report" ./integration/bench/cmd/aokeyd-bench-report
CGO_ENABLED=0 go build -o "$work/bin/aoctl" ./cmd/aoctl
CGO_ENABLED=0 go test -c -o "$work/bin/rotator.test" ./rotator
CGO_ENABLED=0 go test -c -o "$work/bin/daemon.test" ./internal/daemon
fleet_bins=""
if [ "$fleet" != off ] || [ "$birdfleet" != off ]; then
	log "building the real-speaker items: the fleet test binary, aokeyd, and gobgpd v3.37"
	CGO_ENABLED=0 go test -c -o "$work/bin/speakerbench.test" ./integration/speakerbench
	fleet_bins="$work/bin/speakerbench.test $(bash integration/tools/guest-bins.sh)"
	if [ "$fleet" != off ] && [ -n "${AOKEYD_BENCH_FLEET_BEFORE:-}" ]; then
		cp "$AOKEYD_BENCH_FLEET_BEFORE/aokeyd" "$work/bin/aokeyd-before"
		cp "$AOKEYD_BENCH_FLEET_BEFORE/aoctl" "$work/bin/aoctl-before"
		fleet_bins="$fleet_bins $work/bin/aokeyd-before $work/bin/aoctl-before"
	fi
fi

log "planner benchmark on the host (rotator BenchmarkPlan)"
go test -run '^$' -bench '^BenchmarkPlan$' -benchmem -count 3 ./rotator | tee "$work/host-plan.txt" >&2
log "idle reconcile pass on the host's CPU (daemon BenchmarkIdlePass)"
go test -run '^$' -bench '^BenchmarkIdlePass$' -count 3 ./internal/daemon | tee "$work/host-idle.txt" >&2

log "booting the TCP-AO guest: N=$sizes, reps=$reps, sync sample $sample, revoke over $revoke peers, daemon with $daemon peers x $daemon_keys keys"
guest_cmd="mkdir -p /aokeyd/share/bench && aokeyd-bench run -out /aokeyd/share/bench -sizes $sizes -reps $reps -sample $sample -turns $turns -plan-sizes $plan_sizes -revoke-peers $revoke -daemon-peers $daemon -daemon-keys $daemon_keys -passes $passes"
guest_cmd="$guest_cmd && (cd rotator && rotator.test -test.run '^\$' -test.bench '^BenchmarkPlan\$' -test.benchmem -test.count 3 >/aokeyd/share/bench/guest-plan.txt) && cat /aokeyd/share/bench/guest-plan.txt"
guest_cmd="$guest_cmd && (cd internal/daemon && daemon.test -test.run '^\$' -test.bench '^BenchmarkIdlePass\$' -test.count 3 >/aokeyd/share/bench/guest-idle.txt) && cat /aokeyd/share/bench/guest-idle.txt"
before_bins=""
if [ -n "${AOKEYD_BENCH_BEFORE:-}" ]; then
	cp "$AOKEYD_BENCH_BEFORE/aokeyd-bench" "$work/bin/aokeyd-bench-before"
	cp "$AOKEYD_BENCH_BEFORE/daemon.test" "$work/bin/daemon-before.test"
	before_bins="$work/bin/aokeyd-bench-before $work/bin/daemon-before.test"
	guest_cmd="$guest_cmd && mkdir -p /aokeyd/share/bench/before-prog && aokeyd-bench-before run -out /aokeyd/share/bench/before-prog -sizes $sizes -reps $reps -sample $sample -plan-sizes $plan_sizes -revoke-peers $revoke -daemon-peers $daemon -daemon-keys $daemon_keys -passes $passes"
	guest_cmd="$guest_cmd && (cd internal/daemon && daemon-before.test -test.run '^\$' -test.bench '^BenchmarkIdlePass\$' -test.count 3 >/aokeyd/share/bench/before-prog/guest-idle.txt)"
fi
if [ "$fleet" != off ]; then
	# The real-speaker item: its failure (a size the guest does not hold)
	# is reported, and the sizes measured before it still print.
	guest_cmd="$guest_cmd && { (cd integration/speakerbench && AOKEYD_FLEET_SIZES=$fleet AOKEYD_FLEET_OUT=/aokeyd/share/bench AOKEYD_FLEET_FORCE=${AOKEYD_BENCH_FLEET_FORCE:-0} AOKEYD_FLEET_PROFILE=${AOKEYD_BENCH_FLEET_PROFILE:-0} speakerbench.test -test.run '^TestFleet\$' -test.v -test.timeout 60m >/aokeyd/share/bench/fleet.log 2>&1) || echo 'bench: the real-speaker fleet item failed, see fleet.log'; true; }"
	if [ -n "${AOKEYD_BENCH_FLEET_BEFORE:-}" ]; then
		guest_cmd="$guest_cmd && mkdir -p /aokeyd/share/bench/before && { (cd integration/speakerbench && AOKEYD_FLEET_SIZES=${AOKEYD_BENCH_FLEET_BEFORE_SIZES:-64} AOKEYD_FLEET_OUT=/aokeyd/share/bench/before AOKEYD_FLEET_FORCE=${AOKEYD_BENCH_FLEET_FORCE:-0} AOKEYD_FLEET_AOKEYD=aokeyd-before AOKEYD_FLEET_AOCTL=aoctl-before speakerbench.test -test.run '^TestFleet\$' -test.v -test.timeout 30m >/aokeyd/share/bench/before/fleet.log 2>&1) || echo 'bench: the real-speaker fleet item (before) failed, see before/fleet.log'; true; }"
	fi
fi
if [ "$birdfleet" != off ]; then
	# The bird-fleet item (BIRD as the route server under aokeyd's native
	# executor): reported like the fleet item, its failure too.
	guest_cmd="$guest_cmd && { (cd integration/speakerbench && AOKEYD_BIRDFLEET_SIZES=$birdfleet AOKEYD_FLEET_OUT=/aokeyd/share/bench speakerbench.test -test.run '^TestBirdFleet\$' -test.v -test.timeout 60m >/aokeyd/share/bench/birdfleet.log 2>&1) || echo 'bench: the bird-fleet item failed, see birdfleet.log'; true; }"
fi
AOKEYD_VM_OUT="$work/vm" \
	AOKEYD_VM_TIMEOUT=${AOKEYD_VM_TIMEOUT:-5400} \
	AOKEYD_GUEST_BINS="$work/bin/aokeyd-bench $work/bin/aoctl $work/bin/rotator.test $work/bin/daemon.test $before_bins $fleet_bins" \
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
if [ -s "$res/heap.pprof" ]; then
	cp "$res/heap.pprof" "$out/heap.pprof"
	go tool pprof -sample_index=inuse_space -top -nodecount=30 "$work/bin/aokeyd-bench" "$res/heap.pprof" >"$out/heap-top.txt" 2>/dev/null || log "no heap profile summary"
fi
if [ -n "${AOKEYD_BENCH_BEFORE:-}" ] && [ -s "$res/before-prog/heap.pprof" ]; then
	cp "$res/before-prog/heap.pprof" "$out/heap-before.pprof"
	go tool pprof -sample_index=inuse_space -top -nodecount=30 "$AOKEYD_BENCH_BEFORE/aokeyd-bench" "$res/before-prog/heap.pprof" >"$out/heap-before-top.txt" 2>/dev/null || log "no before heap profile summary"
fi
cp "$res/results.json" "$out/guest-results.json"
cp "$work/vm/console.log" "$out/guest-console.log"
"$work/aokeyd-bench-report" -in "$res/results.json" -out "$out" \
	-profile-top "$work/top.txt" -bench "host=$work/host-plan.txt" -bench "guest=$res/guest-plan.txt" \
	-bench "host=$work/host-idle.txt" -bench "guest=$res/guest-idle.txt" \
	-pass-top "$out/pass-top.txt" -steady-top "$out/steady-top.txt"
if [ -n "${AOKEYD_BENCH_BEFORE:-}" ]; then
	mkdir -p "$out/before-prog"
	if "$work/aokeyd-bench-report" -in "$res/before-prog/results.json" -out "$out/before-prog" \
		-bench "guest=$res/before-prog/guest-idle.txt" >/dev/null; then
		{
			echo
			echo "The same items with $AOKEYD_BENCH_BEFORE's aokeyd-bench and daemon.test (before), in the same boot:"
			cat "$out/before-prog/report.txt"
		} >>"$out/report.txt"
	else
		log "no before report (see $res/before-prog)"
	fi
fi
if [ "$fleet" != off ]; then
	cp "$res/fleet.log" "$out/fleet.log" 2>/dev/null || log "no fleet.log from the guest"
	[ -f "$res/fleet.json" ] && cp "$res/fleet.json" "$out/fleet.json"
	{
		echo
		echo "Real speakers (gobgpd v3.37 + BIRD 2.17, N TCP-AO sessions, the aokeyd binary; integration/speakerbench):"
		grep -h '^    fleet_test.go:.*n=[0-9]*: ' "$out/fleet.log" 2>/dev/null | sed 's/^    fleet_test.go:[0-9]*: /  /' || true
		grep -h -- '--- FAIL\|fleet bench stops' "$out/fleet.log" 2>/dev/null | sed 's/^ */  /' || true
		cat "$res/fleet.txt" 2>/dev/null || echo "  (no size measured)"
		if [ -n "${AOKEYD_BENCH_FLEET_BEFORE:-}" ]; then
			mkdir -p "$out/before"
			cp "$res/before/"* "$out/before/" 2>/dev/null || true
			echo "The same with $AOKEYD_BENCH_FLEET_BEFORE's aokeyd and aoctl (before):"
			grep -h -- '--- FAIL\|fleet bench stops' "$out/before/fleet.log" 2>/dev/null | sed 's/^ */  /' || true
			cat "$res/before/fleet.txt" 2>/dev/null || echo "  (no size measured)"
		fi
	} >>"$out/report.txt"
	sed -n '/^Real speakers/,$p' "$out/report.txt"
fi
if [ "$birdfleet" != off ]; then
	cp "$res/birdfleet.log" "$out/birdfleet.log" 2>/dev/null || log "no birdfleet.log from the guest"
	[ -f "$res/birdfleet.json" ] && cp "$res/birdfleet.json" "$out/birdfleet.json"
	{
		echo
		echo "BIRD as a route server (BIRD 2.17, N protocols keyed by aokeyd's native executor, the members one BIRD with N protocols; integration/speakerbench TestBirdFleet):"
		grep -h '^    birdfleet_test.go:.*n=[0-9]*: ' "$out/birdfleet.log" 2>/dev/null | sed 's/^    birdfleet_test.go:[0-9]*: /  /' || true
		grep -h -- '--- FAIL\|bird-fleet bench stops' "$out/birdfleet.log" 2>/dev/null | sed 's/^ */  /' || true
		cat "$res/birdfleet.txt" 2>/dev/null || echo "  (no size measured)"
	} >>"$out/report.txt"
	sed -n '/^BIRD as a route server/,$p' "$out/report.txt"
fi
log "report: $out/report.txt, $out/report.png, $out/report.tsv (raw data: $out/results.json, profile: $out/cpu.pprof)"
