#!/usr/bin/env bash
# make model: checks rotator/model/roll.pml (the roll machine and the
# kernel's RNext rules) with spin, exhaustively: the safety assertions in
# two searches (edits in place apart, below), and the liveness LTL under
# weak fairness (no bitstate; pan's memory is capped at 4 GiB a search).
# Then every mutant beside it (mutant_*.pml) must violate a property; its
# counterexample is shown as the model's events.
#
# Prints "model: states=N depth=D errors=0" for the model (N: both safety
# searches' states, D the deeper one's depth), "model: migrate ..." and
# "model: exec ..." (roll.pml with its executor end, -DEXECEND) for the
# other searches, and "model: mutant=NAME errors=E" per mutant; fails
# otherwise.
#
#   model.sh            the model and every mutant
#   model.sh MUTANT...  only these mutants (names without mutant_ and .pml)
#
# MODEL_REUSE=1 (make test): a whole check's verdict is a function of its
# inputs alone (this script, the model files, spin's and the C compiler's
# versions, the liveness budget): pan's searches are deterministic. A
# passed check is kept under $AOKEYD_CACHE/model/KEY and, with
# MODEL_REUSE=1, printed again instead of rechecked while every input is
# the same (as go test reuses a passed test's result); the first line
# says so. A changed input, a failed check or make model checks afresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$PWD/rotator/model
command -v spin >/dev/null || { echo "model: spin is not installed (make deps installs Debian's spin package)" >&2; exit 1; }
CC=${CC:-cc}
if [ $# -eq 0 ]; then
	# The key names the files, not where the checkout is.
	key=$({
		cat "$0" "$dir"/*.pml
		(cd "$dir" && ls ./*.pml)
		spin -V
		$CC --version
		echo "liveness=${MODEL_LIVENESS_FLAGS:-}"
	} 2>&1 | sha256sum | cut -c1-16)
	kept=${AOKEYD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd}/model/$key
	if [ "${MODEL_REUSE:-}" = 1 ] && [ -s "$kept/output" ]; then
		echo "model: every input is as at the check passed at $(cat "$kept/when") (key $key): its result, not rechecked (make model checks afresh):"
		cat "$kept/output"
		exit 0
	fi
	# The check itself, its output kept when it passes.
	mkdir -p "$(dirname "$kept")"
	# The output is kept only once the check passed; a killed run leaves
	# no partial file behind.
	trap 'rm -f "$kept.out.$$"' EXIT
	set +e
	bash "$0" --check 2>&1 | tee "$kept.out.$$"
	rc=${PIPESTATUS[0]}
	set -e
	if [ "$rc" = 0 ]; then
		mkdir -p "$kept" && mv "$kept.out.$$" "$kept/output" && date -u +%Y-%m-%dT%H:%M:%SZ >"$kept/when"
	else
		rm -f "$kept.out.$$"
	fi
	exit "$rc"
fi
[ "$1" = --check ] && shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build FILE: the verifier for one model file, in its own directory.
build() {
	local src=$1 out=$2 flags=$3
	mkdir -p "$out"
	cp "$dir"/*.pml "$out"/
	(cd "$out" && spin -a "$(basename "$src")" >spin.log 2>&1) || { cat "$out/spin.log" >&2; return 1; }
	# shellcheck disable=SC2086
	(cd "$out" && $CC -DMEMLIM=4096 -DNFAIR=3 $flags -o pan pan.c) || return 1
}

field() { sed -n "$1" "$2" | head -1; }

# search NAME SPINFLAGS PANFLAGS CCFLAGS [MODEL]: one exhaustive search of
# MODEL (default roll.pml);
# writes states, depth, errors, mem and secs to $work/NAME/result (shell
# assignments) and the trail of an error to $work/NAME/trail. Exits non-zero
# if the search did not complete.
search() {
	local name=$1 out=$work/$1 model=${5:-roll.pml}
	mkdir -p "$out"
	cp "$dir"/*.pml "$out"/
	# shellcheck disable=SC2086
	(cd "$out" && spin $2 -a "$model" >spin.log 2>&1) || { cat "$out/spin.log" >&2; exit 1; }
	# shellcheck disable=SC2086
	(cd "$out" && $CC -O2 -DMEMLIM=4096 -DNFAIR=3 $4 -o pan pan.c)
	local start end
	start=$(date +%s.%N)
	# shellcheck disable=SC2086
	(cd "$out" && ./pan -m200000 $3 >pan.out 2>&1) || true
	end=$(date +%s.%N)
	errors=$(field 's/.*errors: \([0-9]*\).*/\1/p' "$out/pan.out")
	states=$(field 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out/pan.out")
	depth=$(field 's/.*depth reached \([0-9]*\),.*/\1/p' "$out/pan.out")
	mem=$(field 's/^ *\([0-9.]*\).total actual memory usage.*/\1/p' "$out/pan.out")
	secs=$(echo "$end - $start" | bc)
	if grep -q "Search not completed\|out of memory" "$out/pan.out" || [ -z "$errors" ]; then
		cat "$out/pan.out" >&2
		echo "model: the $name search did not complete" >&2
		exit 1
	fi
	if [ "$errors" != 0 ]; then
		(cd "$out" && spin -t "$model" 2>&1 | grep -E 'EV |ST |CRASHAT|DROP|assert|CYCLE|error' | sed 's/^[[:space:]]*/    /') >"$out/trail" || true
	fi
	printf 'states=%s depth=%s errors=%s mem=%s secs=%s\n' "$states" "$depth" "$errors" "$mem" "$secs" >"$out/result"
}

# reported NAME SPINFLAGS MODEL: one exhaustive safety search of MODEL,
# reported as "model: NAME states=N depth=D errors=E" with the
# counterexample of an error (rc=1 then).
reported() {
	search "$1" "$2" "" "-DNOCLAIM" "$3"
	eval "$(cat "$work/$1/result")"
	if [ -s "$work/$1/trail" ]; then
		echo "  $1 counterexample:"
		cat "$work/$1/trail"
	fi
	[ "$errors" = 0 ] || rc=1
	echo "model: $1 states=$states depth=$depth errors=$errors"
}

rc=0
if [ $# -eq 0 ]; then
	# Safety, assertions only, in two searches that together take every
	# fault budget of roll.pml's defaults: every fault but edits in place
	# (EDITS=0), and edits with every fault but the lost record
	# (LOSTRECORDS=0). In the model a lost record is a second restart
	# like a crash (only the record_trusted mutant reads the record); both
	# budgets at once, with A' on the sessions, exceed the 4 GiB cap
	# (51.3M states, 7.5 GB with -DCOLLAPSE).
	# Liveness under weak fairness: the LTL (and the assertions again),
	# with the budgets MODEL_LIVENESS_FLAGS gives (default: no crash and
	# no segment loss, a switch timeout, a reconnect and an edit).
	# pan is single-threaded: the safety searches run one after the other
	# beside the liveness search.
	(search safety "-DEDITS=0" "" "-DNOCLAIM" && search edits "-DLOSTRECORDS=0" "" "-DNOCLAIM") &
	safety_pid=$!
	search liveness "${MODEL_LIVENESS_FLAGS:--DCRASHES=0 -DLOSSES=0}" "-a -f" "" &
	liveness_pid=$!
	wait "$safety_pid" || exit 1
	wait "$liveness_pid" || exit 1
	# The TCP-MD5 to TCP-AO migration (migrate.pml): safety, exhaustive.
	reported migrate "" migrate.pml
	# The executor end (roll.pml -DEXECEND: end 1 keys its own sockets
	# from aokeyd's file, as BIRD; internal/birdnative): safety, exhaustive,
	# every fault its end has.
	reported exec "-DEXECEND" roll.pml
	eval "$(cat "$work/safety/result")"
	s_states=$states s_depth=$depth s_errors=$errors s_mem=$mem s_secs=$secs
	eval "$(cat "$work/edits/result")"
	e_states=$states e_depth=$depth e_errors=$errors e_mem=$mem e_secs=$secs
	eval "$(cat "$work/liveness/result")"
	for name in safety edits liveness; do
		if [ -s "$work/$name/trail" ]; then
			echo "  $name counterexample:"
			cat "$work/$name/trail"
		fi
	done
	[ "$((s_errors + e_errors + errors))" = 0 ] || rc=1
	echo "model: states=$(awk -v a="$s_states" -v b="$e_states" 'BEGIN { printf "%d", a + b }') depth=$((s_depth > e_depth ? s_depth : e_depth)) errors=$((s_errors + e_errors + errors))"
	printf '  safety, exhaustive, every fault but edits: %s states, depth %s, %s MB, %.1f s\n' "$s_states" "$s_depth" "$s_mem" "$s_secs"
	printf '  safety, exhaustive, edits and every fault but the lost record: %s states, depth %s, %s MB, %.1f s\n' "$e_states" "$e_depth" "$e_mem" "$e_secs"
	printf '  liveness, exhaustive, weak fairness (%s): %s states, depth %s, %s MB, %.1f s\n' \
		"${MODEL_LIVENESS_FLAGS:--DCRASHES=0 -DLOSSES=0}" "$states" "$depth" "$mem" "$secs"
	set -- $(cd "$dir" && ls mutant_*.pml | sed 's/^mutant_//; s/\.pml$//')
	MODEL_ALL_MUTANTS=1
fi

# mutant NAME: builds and searches one mutant; writes its report (the
# "model: mutant=" line and the counterexample) to $work/NAME.report and
# exits non-zero when the mutant violates nothing.
mutant() {
	local m=$1 out=$work/$1 errors
	[ -f "$dir/mutant_$m.pml" ] || { echo "model: no mutant $m" >"$work/$m.report"; return 1; }
	{
		# A mutant needs one counterexample: a safety search, unoptimised pan.
		build "mutant_$m.pml" "$out" "-DNOCLAIM" || { echo "model: mutant=$m did not build"; return 1; }
		(cd "$out" && ./pan -m200000 >pan.out 2>&1) || true
		errors=$(field 's/.*errors: \([0-9]*\).*/\1/p' "$out/pan.out")
		echo "model: mutant=$m errors=${errors:-?}"
		if [ "${errors:-0}" = 0 ]; then
			echo "  mutant $m violates no property: the properties are too weak"
			return 1
		fi
		if grep -q '"roll.pml"' "$dir/mutant_$m.pml"; then
			echo "  counterexample (events, then ST: state0 state1 keys0 cur0 rnext0 keys1 cur1 rnext1 listener0 listener1 phase0 phase1 edited0 edited1 listenerA-verified0 listenerA-verified1; keys A=1 B=2 A'=4 (A's IDs, edited material), a mask; cur and rnext are IDs):"
		else
			echo "  counterexample (events):"
		fi
		(cd "$out" && spin -t "mutant_$m.pml" 2>&1 | grep -E 'EV |ST |CRASHAT|DROP|assert|CYCLE|violated|error' |
			sed 's/^[[:space:]]*/    /' | tail -n "${MODEL_TRAIL_LINES:-40}") || true
	} >"$work/$m.report" 2>&1
}

# Every mutant beside the model, and each one the model exists for (a
# missing file is a failure: the property it stands for would go
# unchecked). pan is single-threaded: two mutants at a time, one per
# core; the reports are printed in name order once all ended.
required="retire_early retire_in_use switch_unproven lifetime_drops_listener edit_applied edit_counters_only edit_unsettled md5_early restart_no_gate record_trusted exec_retire_unseen"
if [ "${MODEL_ALL_MUTANTS:-}" = 1 ]; then
	for m in $required; do
		case " $* " in *" $m "*) ;; *) set -- "$@" "$m" ;; esac
	done
fi
pids=()
for m in "$@"; do
	while [ "$(jobs -rp | wc -l)" -ge "${MODEL_JOBS:-2}" ]; do wait -n || true; done
	mutant "$m" &
	pids+=("$!")
done
i=0
for m in "$@"; do
	wait "${pids[$i]}" || rc=1
	cat "$work/$m.report"
	i=$((i + 1))
done
exit $rc
