#!/usr/bin/env bash
# The field scenario (issue 48), run by the field guest's systemd unit at
# every boot (entry.sh): aokeyd from its .deb under systemd, beside four
# speakers on one router, each on its own address and driven by its own
# aokeyd: Debian's BIRD 2 (bird.service, -u bird -g bird; aokeyd.service),
# BIRD 3 (aokeyd@bird3), FRR (frr.service, bgpd under `aokeyd exec`;
# aokeyd@frr) and gobgpd (the package's example unit; aokeyd@gobgpd),
# through the operator's events, each with a roll in progress. The far end
# is one BIRD and one aokeyd the scenario starts in network namespace fe,
# peering with all four.
#
# After each event, for every speaker: the session with the far end is up
# with TCP-AO, the roll in progress completes (the new key sends, the old
# one left the session and the listener, read from the speaker's sockets),
# an unsigned connection from the peer's address is refused; and the
# hand-written TCP-AO key of a neighbor aokeyd does not manage is still on
# BIRD 2's listener. Exits 0 when every check
# held, 1 when one failed, 100 to ask entry.sh for a reboot (the state
# kept in /var/lib/aokeyd-field says where to go on).
set -uo pipefail
exec > >(tee -a /dev/console) 2>&1
share=${FIELD_SHARE:?} src=${FIELD_SRC:?}
st=/var/lib/aokeyd-field
mkdir -p "$st"
phase=$(cat "$st/phase" 2>/dev/null || echo first)
# A boot the scenario did not ask for (a kernel panic, panic=-1 reboots
# at once) must end the run, not start the scenario over on a root that
# is half through it: "running" is set while a boot's scenario runs and
# cleared only where the scenario asks entry.sh for its reboot.
if [ -e "$st/running" ]; then
	printf 'field: [%s] FAIL: the guest restarted without the scenario asking (phase %s): a kernel panic or a crash; the console log has the kernel'"'"'s last words\n' "$(cut -d' ' -f1 /proc/uptime)" "$phase" | tee -a /dev/console
	echo 1 >"$share/results/unplanned-reboot"
	exit 1
fi
touch "$st/running"
sync
# say: one line of the scenario's log, stamped with the guest's uptime
# (where its minutes go); the result line is printed without it.
say() { printf 'field: [%s] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; }
fail() {
	say "FAIL: $*"
	# The far end's aokeyd, if it runs: its goroutines, into its log.
	pkill -QUIT -f 'aokeyd -config /srv/fe/aokeyd.yaml' && sleep 3
	local s
	for s in $SPEAKERS; do
		say "$s: its sockets for $F: $(keys "$s" "$F")"
		say "$s: aoctl status:"; timeout 20 aoctl --socket "$(sock_of "$s")" status "$F"
		say "the far end's aoctl status for $s:"; timeout 20 aoctl status --socket /srv/fe/control.sock "$(addr_of "$s")"
	done
	timeout 20 birdc -s /srv/fe/bird.ctl show protocols
	for f in /srv/fe/aokeyd.log /srv/fe/bird.log; do
		[ -s "$f" ] && { say "$f (its own lines, last 60):"; grep -a 'level=\|^aokeyd' "$f" | tail -n 60; }
	done
	say "journal of aokeyd and bird (tail):"
	journalctl -u 'aokeyd*' -u bird -u bird3 -u frr -u gobgpd-aokeyd --no-pager | tail -n 80
	echo 1 >"$share/results/scenario-fail"
	exit 1
}
count() { echo $(($(cat "$st/$1" 2>/dev/null || echo 0) + 1)) >"$st/$1"; }
get() { cat "$st/$1" 2>/dev/null || echo 0; }

# The router's four speakers, each on its own address of the link to the
# far end F: BIRD 2 on R, BIRD 3 on R3, FRR on RF, gobgpd on RG.
# FM is a second far-end address, FRR's neighbor on TCP-MD5 that the
# guide's migration moves to TCP-AO (in a /30 of its own: the migration's
# TCP-AO keys sit at 10.48.0.108/30 on bgpd's listener).
R=10.48.0.1 R3=10.48.0.3 RF=10.48.0.4 RG=10.48.0.5 F=10.48.0.101 FOREIGN=10.48.0.201 FM=10.48.0.110
SPEAKERS="bird2 bird3 frr gobgpd"
addr_of() { case $1 in bird2) echo $R ;; bird3) echo $R3 ;; frr) echo $RF ;; gobgpd) echo $RG ;; esac; }
# The aokeyd driving each, and its control socket.
unit_of() { case $1 in bird2) echo aokeyd ;; *) echo "aokeyd@$1" ;; esac; }
sock_of() { case $1 in bird2) echo /run/aokeyd/control.sock ;; *) echo "/run/aokeyd/$1.sock" ;; esac; }
# The speaker's process, whose sockets the checks read.
pid_of() {
	case $1 in
	bird2) systemctl show -p MainPID --value bird ;;
	bird3) systemctl show -p MainPID --value bird3 ;;
	frr) cat /run/frr/bgpd.pid ;;
	gobgpd) pgrep -x gobgpd | head -n 1 ;; # the child of its aokeyd exec
	esac
}

# guide STEP [SED [ROUTER]]: runs the shell block of docs/operations.md
# that follows its "<!-- step: STEP -->" line, as written but for the
# lab's addresses (192.0.2.1 the router's, ROUTER or R; 192.0.2.2 its
# neighbor) and SED's substitutions (the lab's key names), with bash -e,
# and counts it.
guide() {
	local step=$1 extra=${2:-} r=${3:-$R} block
	block=$(awk -v want="<!-- step: $step -->" '
		$0 == want { found = 1; next }
		found && /^```sh$/ { inblock = 1; next }
		inblock && /^```$/ { exit }
		inblock { print }' "$src/docs/operations.md")
	[ -n "$block" ] || fail "docs/operations.md has no step $step"
	block=$(printf '%s\n' "$block" | sed -e "s/192\.0\.2\.1/$r/g" -e "s/192\.0\.2\.2/$F/g" ${extra:+-e "$extra"})
	say "guide step $step"
	if [ -n "${GUIDE_SOFT:-}" ]; then # the defects mode: a failed step is reported, not fatal
		bash -e -c "$block" || say "docs/operations.md step $step failed (defects mode: going on)"
		return 0
	fi
	bash -e -c "$block" || fail "docs/operations.md step $step failed"
	count guide_steps
}
# wait_for SECONDS WHAT CMD...: until CMD succeeds; the bound holds on a
# busy emulated machine (each check is cheap and repeated every second).
wait_for() {
	local n=$1 what=$2
	shift 2
	local i
	for ((i = 0; i < n; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	case $what in *"session with the far end established"*) count stranded ;; esac
	fail "$what: not within ${n}s"
}
# keys SPEAKER PEER: the keys SPEAKER's sockets hold for PEER. Each
# check's commands are bounded (timeout): one that hangs (a birdc BIRD
# does not answer) is one failed try of wait_for, not a stuck run.
keys() {
	local pid
	pid=$(pid_of "$1") && [ -n "$pid" ] && [ "$pid" != 0 ] || return 1
	timeout -k 5 20 probe keys "$pid" "$2" 2>/dev/null
}

# --- the lab: a far end in namespace fe, kept across reboots by a unit.
net_unit() {
	cat >/etc/systemd/system/field-net.service <<UNIT
[Unit]
Description=field lab: the far end's namespace and link
DefaultDependencies=no
Before=network.target bird.service bird3.service frr.service gobgpd-aokeyd.service aokeyd.service aokeyd@bird3.service aokeyd@frr.service aokeyd@gobgpd.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'ip netns add fe; ip link add fe0 type veth peer name fe1; ip link set fe1 netns fe; ip addr add $R/24 dev fe0; ip addr add $R3/24 dev fe0; ip addr add $RF/24 dev fe0; ip addr add $RG/24 dev fe0; ip link set fe0 up; ip -n fe addr add $F/24 dev fe1; ip -n fe addr add $FOREIGN/24 dev fe1; ip -n fe addr add $FM/24 dev fe1; ip -n fe link set fe1 up; ip -n fe link set lo up'
[Install]
WantedBy=multi-user.target
UNIT
	systemctl daemon-reload
	systemctl enable --now field-net.service
}

# key NAME SEND RECV [SEND_START SEND_END ACCEPT_END]: one key line of a
# key file (hex secrets: the lab's, derived from the name).
key() {
	local l="      - {name: $1, send_id: $2, recv_id: $3, algorithm: hmac(sha256), secret_hex: $(printf 'field secret %s' "$1" | od -An -tx1 | tr -d ' \n')"
	[ -n "${4:-}" ] && l="$l, send_lifetime: {start: $4${5:+, end: $5}}"
	[ -n "${6:-}" ] && l="$l, accept_lifetime: {start: 2026-01-01T00:00:00Z, end: $6}"
	echo "$l}"
}
# keyfile N PEER MIRROR T E: one end's key file for roll N (MIRROR 1: the
# far end's, whose send and recv IDs are the router's swapped).
keyfile() {
	local n=$1 p=$2 m=$3 t=$4 e=$5 a b
	echo "chains:"
	echo "  core:"
	echo "    peers: [$p]"
	echo "    keys:"
	if [ "$n" -gt 1 ]; then
		a=$((n - 1)) b=$((n + 99))
		[ "$m" = 1 ] && { a=$((n + 99)) b=$((n - 1)); }
		key "k$((n - 1))" "$a" "$b" 2026-01-01T00:00:00Z "$t" "$e"
	fi
	a=$n b=$((n + 100))
	[ "$m" = 1 ] && { a=$((n + 100)) b=$n; }
	key "k$n" "$a" "$b" "$([ "$n" -gt 1 ] && echo "$t")"
}
# keyfiles N: the key files of both ends for roll N: key kN-1 ends, kN
# starts 20 s from now (each end reads its key file every 1 or 2 s);
# kN-1 is accepted 25 s longer.
keyfiles() {
	local n=$1 t e
	t=$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%SZ)
	e=$(date -u -d '+45 seconds' +%Y-%m-%dT%H:%M:%SZ)
	keyfile "$n" "$F" 0 "$t" "$e" >"$st/keys.new" && install -m 0600 "$st/keys.new" /etc/aokeyd/keys.yaml
	keyfile "$n" "$R, $R3, $RF, $RG" 1 "$t" "$e" >"$st/fe-keys.new" && install -m 0600 "$st/fe-keys.new" /srv/fe/keys.yaml
	echo "$n" >"$st/roll"
}

# --- the far end: BIRD and aokeyd (type bird) in namespace fe, started
# by hand (they are the lab, not the router under test).
far_end() {
	mkdir -p /srv/fe/keys && chmod 0700 /srv/fe /srv/fe/keys
	cat >/srv/fe/aokeyd.yaml <<CONF
key_source: {type: file, refresh: 1s, file: {path: /srv/fe/keys.yaml}}
policy: {path: /srv/fe/policy.yaml}
speaker:
  type: bird
  bird: {control_socket: /srv/fe/bird.ctl, keys_dir: /srv/fe/keys, pid_file: /srv/fe/bird.pid, poll_interval: 250ms, group: root}
control: {socket: /srv/fe/control.sock}
metrics: {listen: "off"}
CONF
	local s a
	printf 'version: 1\nkey_chains:\n  - name: core\npeers:\n' >/srv/fe/policy.yaml
	printf 'router id %s;\nprotocol device {}\nprotocol static { ipv4; route 198.51.100.0/24 blackhole; }\n' "$F" >/srv/fe/bird.conf
	for s in $SPEAKERS; do
		a=$(addr_of "$s")
		printf '  - neighbor: %s\n    key_chain: core\n' "$a" >>/srv/fe/policy.yaml
		cat >>/srv/fe/bird.conf <<CONF
protocol bgp r_$s {
	local $F as 65101;
	strict bind yes;
	neighbor $a as 65001;
	hold time 30; keepalive time 10; connect retry time 2; error wait time 1, 4;
	include "/srv/fe/keys/$a.conf";
	ipv4 { import all; export all; };
}
CONF
	done
	# FRR's TCP-MD5 neighbor (the guide's migration): not in the far
	# end's aokeyd policy; its authentication is a file the lab swaps at
	# the migration's switch time for what aoctl peer-config rendered.
	# Every protocol binds its own local address (strict bind): m_frr's
	# and r_frr's neighbor is one address, RF, and one listening socket
	# cannot hold a TCP-MD5 and a TCP-AO key for it (the kernel refuses
	# the second kind; BIRD then fails r_frr with "Authentication
	# failed").
	[ -f /srv/fe/m_frr-auth.conf ] || echo 'password "field-md5-password";' >/srv/fe/m_frr-auth.conf
	cat >>/srv/fe/bird.conf <<CONF
protocol bgp m_frr {
	local $FM as 65102;
	strict bind yes;
	neighbor $RF as 65001;
	hold time 30; keepalive time 10; connect retry time 2; error wait time 1, 4;
	include "/srv/fe/m_frr-auth.conf";
	ipv4 { import all; export all; };
}
CONF
	say "the far end's config: $(ip netns exec fe aoctl validate /srv/fe/aokeyd.yaml 2>&1 | tr '\n' ' ')"
	GOTRACEBACK=all ip netns exec fe setsid aokeyd -config /srv/fe/aokeyd.yaml -state-dir /srv/fe/state >>/srv/fe/aokeyd.log 2>&1 </dev/null &
	sleep 5
	say "far end: $(pgrep -a aokeyd | tr '\n' ' ')"
	for s in $SPEAKERS; do
		wait_for 120 "the far end's aokeyd writes BIRD's include file for $s" test -f "/srv/fe/keys/$(addr_of "$s").conf"
	done
	ip netns exec fe setsid bird -f -c /srv/fe/bird.conf -s /srv/fe/bird.ctl -P /srv/fe/bird.pid >>/srv/fe/bird.log 2>&1 </dev/null &
	wait_for 60 "the far end's BIRD answers" timeout -k 5 20 birdc -s /srv/fe/bird.ctl show status
	say "far end up: BIRD and aokeyd in namespace fe"
}

# --- the other speakers. BIRD 3: the lab's is unpacked under /opt/bird3
# with its configuration in /etc/bird3 (Debian's bird3 package, which
# conflicts with bird2, uses /etc/bird as bird2 does: there the guide's
# BIRD steps apply as written). Its aokeyd instance writes the include
# files into /etc/bird3/aokeyd, which the unit's sandbox then needs
# writable: an operator's drop-in.
bird3_setup() {
	install -d -m 0700 /etc/bird3/aokeyd
	mkdir -p /etc/systemd/system/aokeyd@bird3.service.d
	printf '[Service]\nReadWritePaths=/etc/bird3/aokeyd\n' >/etc/systemd/system/aokeyd@bird3.service.d/keys-dir.conf
	cat >/etc/aokeyd/bird3.yaml <<CONF
key_source: {type: file, refresh: 2s, file: {path: /etc/aokeyd/keys.yaml}}
policy: {path: /etc/aokeyd/policy.yaml}
speaker:
  type: bird
  bird: {control_socket: /run/bird3/bird.ctl, keys_dir: /etc/bird3/aokeyd, binary: /opt/bird3/usr/sbin/bird}
control: {socket: /run/aokeyd/bird3.sock}
metrics: {listen: 127.0.0.1:9182}
CONF
	aoctl validate /etc/aokeyd/bird3.yaml || fail "aoctl validate /etc/aokeyd/bird3.yaml"
	systemctl daemon-reload
	systemctl enable --now aokeyd@bird3 || fail "systemctl enable --now aokeyd@bird3"
	wait_for 120 "aokeyd@bird3 writes BIRD 3's include file" test -f "/etc/bird3/aokeyd/$F.conf"
	cat >/etc/bird3/bird.conf <<CONF
router id $R3;
protocol device {}
protocol static { ipv4; route 203.0.113.0/24 blackhole; }
protocol bgp fe {
	local $R3 as 65001;
	strict bind yes;
	neighbor $F as 65101;
	hold time 30; keepalive time 10; connect retry time 2; error wait time 1, 4;
	include "/etc/bird3/aokeyd/$F.conf";
	ipv4 { import all; export all; };
}
CONF
	chown root:bird /etc/bird3/bird.conf && chmod 0640 /etc/bird3/bird.conf
	systemctl enable bird3 && systemctl restart bird3 || fail "systemctl restart bird3"
}

# --- the router's BIRD: Debian's, under bird.service (-u bird -g bird),
# configured by the guide (bird-include); the lab adds a neighbor aokeyd
# does not manage, keyed by hand, whose key must never be touched.
foreign_protocol() {
	cat >>/etc/bird/bird.conf <<CONF
protocol bgp foreign {
	local $R as 65001;
	strict bind yes;
	neighbor $FOREIGN as 65201;
	passive;
	authentication ao;
	keys { key { send id 77; recv id 78; secret "operator's own key"; algorithm hmac sha256; }; };
	ipv4 { import none; export none; };
}
CONF
	systemctl reload bird || fail "systemctl reload bird (the foreign neighbor)"
}

# --- checks after an event.
session_on() { # session_on SPEAKER K: its session sends with key K and the old key left it
	local out k=$2
	out=$(keys "$1" "$F") || return 1
	case "$out" in *" current=$k "*) ;; *) return 1 ;; esac
	if [ "$k" -gt 1 ]; then
		case "$out" in *"$((k - 1))/$((k + 99))"*) return 1 ;; esac
	fi
	return 0
}
session_keyed() { keys "$1" "$F" | grep -q " current=[0-9]"; }
current_is() { keys "$1" "$F" | grep -q " current=$2 "; }
foreign_kept() { keys bird2 "$FOREIGN" | grep -q 'listener=77/78'; }
# established SPEAKER: the far end's session with it (the far end's view:
# one BIRD, one protocol per speaker).
established() { timeout -k 5 20 birdc -s /srv/fe/bird.ctl show protocols "r_$1" | grep -q Established; }
# check_up WHAT: after an event, every speaker's session is up with
# TCP-AO (its sockets hold the chain's keys), an unsigned SYN is refused,
# and the foreign key is kept. check WHAT: that, and the roll in progress
# completes (two events may share one roll: the first gets check_up).
check_up() {
	local what=$1 s
	for s in $SPEAKERS; do
		# A session that does not come back is stranded: counted, then
		# the run fails.
		wait_for 240 "$what: $s's session with the far end established" established "$s"
	done
	for s in $SPEAKERS; do
		wait_for 240 "$what: $s's session keyed" session_keyed "$s"
		if timeout -k 5 20 ip netns exec fe probe unsigned "$F" "$(addr_of "$s")" >/dev/null 2>&1; then
			count unsigned
			fail "$what: $s took an unsigned connection from $F"
		fi
	done
	foreign_kept || fail "$what: the foreign neighbor's key left BIRD's listener: $(keys bird2 "$FOREIGN")"
	say "$what: every speaker's session up with TCP-AO; unsigned refused; foreign key kept"
}
check() {
	local what=$1 k s
	k=$(get roll)
	check_up "$what"
	for s in $SPEAKERS; do
		wait_for 240 "$what: $s: the roll to k$k completes (k$k sends, k$((k - 1)) gone)" session_on "$s" "$k"
	done
	say "$what: every speaker's roll to k$k completed"
	for s in $SPEAKERS; do say "  $s: $(keys "$s" "$F")"; done
}
# instances: aokeyd's instances (aokeyd@NAME), which the guide's
# reload and restart steps (aokeyd.service) do not name.
instances() { local s; for s in $SPEAKERS; do [ "$s" = bird2 ] || echo "aokeyd@$s"; done; }
mainpids() { local u; for u in aokeyd $(instances); do echo "$u=$(systemctl show -p MainPID --value "$u")"; done; }
roll() { # roll: the next key, 30 s away
	keyfiles $(($(get roll) + 1))
	say "roll to k$(get roll) announced"
}

# fm: FRR's aokeyd's status of the migrating neighbor FM, as JSON on one
# line without spaces; fm_has TEXT: it holds TEXT.
fm() { timeout -k 5 20 aoctl --socket /run/aokeyd/frr.sock status "$FM" --json 2>/dev/null | tr -d ' \n'; }
fm_has() { fm | grep -qF "$1"; }
fm_up() { timeout -k 5 20 birdc -s /srv/fe/bird.ctl show protocols m_frr | grep -q Established; }
# migration: the guide's two steps for FRR's neighbor FM on TCP-MD5, the
# far end's change applied at the switch time, and the checks: the
# session back with TCP-AO, the password gone, status done, an unsigned
# SYN from FM refused before, during and after.
migration() {
	local unsigned=0
	guide md5-peer "s/192\.0\.2\.3/$FM/g" "$RF"
	wait_for 240 "FRR's session with $FM on TCP-MD5" fm_up
	wait_for 60 "status: $FM on tcp-md5" fm_has '"auth":"tcp-md5"'
	guide migrate "s/192\.0\.2\.3/$FM/g" "$RF"
	[ -s "/root/far-end-$FM.conf" ] || fail "the migrate step rendered no far-end change"
	wait_for 120 "the migration prepared, then switching" fm_has '"step":"switching"'
	if timeout -k 5 20 ip netns exec fe probe unsigned "$FM" "$RF" >/dev/null 2>&1; then unsigned=1; fi
	# The far end's operator applies the rendered change at the switch time.
	cp "/root/far-end-$FM.conf" /srv/fe/m_frr-auth.conf
	timeout -k 5 60 birdc -s /srv/fe/bird.ctl configure >/dev/null || fail "the far end's birdc configure with the migration's change"
	wait_for 240 "the migration of $FM done" fm_has '"step":"done"'
	wait_for 240 "FRR's session with $FM back, with TCP-AO" fm_up
	wait_for 60 "status: $FM on tcp-ao" fm_has '"auth":"tcp-ao"'
	if timeout -k 5 20 ip netns exec fe probe unsigned "$FM" "$RF" >/dev/null 2>&1; then unsigned=1; fi
	[ "$unsigned" = 0 ] || { count unsigned; fail "FRR took an unsigned connection from $FM during the migration"; }
	count migrations
	say "migration of $FM (FRR, TCP-MD5 to TCP-AO): done, the session up with TCP-AO, unsigned refused"
}

# defects: issue 48's package defects, each checked on its own in one
# boot and reported, not failed at the first (AOKEYD_FIELD_ONLY=defects;
# AOKEYD_FIELD_DEB_REPO names the checkout whose package is checked, an
# older one's to show the checks fail on it; AOKEYD_FIELD_DROPIN gets
# past ProtectSystem to show the next). The full scenario makes the same
# checks on this tree's package and fails at the first. Prints
# "field-defects: package=V keys_dir_writable=B include_readable=B
# control_socket=B key_file_written_back=B runtime_kept=B" (1 held, 0
# broken).
defects() {
	local w=0 r=0 c=0 b=0 k=0 caps groups
	net_unit
	(cd "$share/deb/1" && guide install) || exit 1
	guide keys
	keyfiles 1
	if [ -s "$share/dropin.conf" ]; then
		mkdir -p /etc/systemd/system/aokeyd.service.d && cp "$share/dropin.conf" /etc/systemd/system/aokeyd.service.d/field.conf
		systemctl daemon-reload
	fi
	GUIDE_SOFT=1 guide bird-config
	# ProtectSystem: aokeyd writes BIRD's include file.
	for ((i = 0; i < 60; i++)); do [ -f "/etc/bird/aokeyd/$F.conf" ] && { w=1; break; }; sleep 1; done
	[ "$w" = 1 ] || say "defect: no include file in /etc/bird/aokeyd after 60 s; aokeyd: $(journalctl -u aokeyd -o cat --no-pager | grep -i -m 3 'read-only\|denied\|error' | tr '\n' ' ')"
	# BIRD reads its configuration as bird: the include file must be
	# readable by that user, through its directory.
	if [ "$w" = 1 ]; then
		runuser -u bird -- cat "/etc/bird/aokeyd/$F.conf" >/dev/null 2>&1 && r=1
		[ "$r" = 1 ] || say "defect: user bird cannot read the include file: $(ls -ld /etc/bird/aokeyd "/etc/bird/aokeyd/$F.conf" | tr '\n' ' ')"
	fi
	# ProtectSystem: a global revoke writes revoked: true back into the
	# shipped key file, /etc/aokeyd/keys.yaml.
	GUIDE_SOFT=1 guide revoke
	grep -q 'name: k1,.*revoked: true' /etc/aokeyd/keys.yaml && b=1
	[ "$b" = 1 ] || say "defect: the revoke was not written back into /etc/aokeyd/keys.yaml; aokeyd: $(journalctl -u aokeyd -o cat --no-pager | grep -i -m 3 'read-only\|denied\|keys.yaml' | tr '\n' ' ')"
	# BIRD's control socket, made by BIRD running as bird (a
	# configuration that includes nothing), reached with aokeyd's unit's
	# capability bounding set and supplementary groups, as root.
	printf 'router id %s;\nprotocol device {}\n' "$R" >/etc/bird/bird.conf
	chown root:bird /etc/bird/bird.conf && chmod 0640 /etc/bird/bird.conf
	systemctl restart bird || say "systemctl restart bird (a configuration with no include) failed"
	wait_for 60 "BIRD's control socket" test -S /run/bird/bird.ctl
	caps=$(systemctl show -p CapabilityBoundingSet --value aokeyd)
	groups=$(systemctl show -p SupplementaryGroups --value aokeyd)
	# birdc run as root with exactly the unit's capability bounding set
	# (what exec leaves a root process) and supplementary groups.
	local out bset
	bset=-all$(for c in $caps; do printf ',+%s' "${c#cap_}"; done)
	if out=$(setpriv --bounding-set="$bset" ${groups:+--groups="$(echo "$groups" | tr ' ' ,)"} \
		-- /usr/bin/timeout 20 /usr/sbin/birdc -s /run/bird/bird.ctl show status 2>&1); then
		c=1
	else
		say "defect: BIRD's control socket ($(stat -c '%U:%G %a' /run/bird/bird.ctl)) unreachable with aokeyd's capabilities ($caps) and groups (${groups:-none}): $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-300)"
	fi
	# The runtime directory (the connect guards' sockets) kept across a
	# restart of aokeyd.
	touch /run/aokeyd/field-marker
	systemctl restart aokeyd
	[ -e /run/aokeyd/field-marker ] && k=1
	[ "$k" = 1 ] || say "defect: systemctl restart aokeyd removed /run/aokeyd"
	printf 'field-defects: package=%s keys_dir_writable=%s include_readable=%s control_socket=%s key_file_written_back=%s runtime_kept=%s\n' \
		"$(dpkg-query -W -f '${Version}' aokeyd)" "$w" "$r" "$c" "$b" "$k"
	echo 0 >"$share/results/done"
}

case $phase in
first)
	say "init=$(cat /proc/1/comm) kernel=$(uname -r) $(grep '^CONFIG_TCP_AO=' "/boot/config-$(uname -r)")"
	# The boot's own job (this unit) is still running: is-system-running
	# --wait would wait for itself. multi-user.target is what it follows.
	wait_for 300 "multi-user.target" systemctl is-active --quiet multi-user.target
	[ -z "$(systemctl --failed --no-legend)" ] || say "failed units: $(systemctl --failed --no-legend | tr '\n' ' ')"
	say "TCP_AO_ADD_KEY per algorithm: $(probe algs 127.0.0.1 | tr '\n' ';')"
	only=$(cat "$share/only")
	if [ -z "$only" ] || [ "$only" = conformance ]; then
		# The tcpao package's kernel tests and the conformance table and
		# differential test, on Debian's kernel.
		# TestKeyedSocketsArePlainTCP reads the whole source tree (the
		# guest has tcpao's alone): it runs on the host, in test-unit.
		(cd "$src/tcpao" && tcpao.test -test.timeout=20m -test.skip '^TestKeyedSocketsArePlainTCP$' 2>&1 | grep -v '^=== \|^    --- PASS\|^--- PASS')
		echo "${PIPESTATUS[0]}" >"$share/results/tcpao"
		say "the conformance table and the differential test on $(uname -r)"
		(cd "$src/tcpao/tcpaotest/conformance" && AOKEYD_DIFFERENTIAL_SEQUENCES=200 conformance.test -test.v -test.timeout=20m 2>&1 | grep -v '^=== \|^    --- PASS')
		echo "${PIPESTATUS[0]}" >"$share/results/conformance"
	fi
	if [ "$only" = conformance ]; then echo done >"$share/results/done"; echo 0 >"$share/results/done"; exit 0; fi
	if [ "$only" = defects ]; then defects; exit 0; fi
	net_unit
	(cd "$share/deb/1" && guide install) || exit 1
	systemctl is-active --quiet aokeyd && fail "a first install started aokeyd"
	mkdir -p /srv/fe
	guide keys
	keyfiles 1 # the lab's keys, for both ends
	if [ -s "$share/dropin.conf" ]; then # an operator's drop-in (a run showing a later defect of an older package)
		mkdir -p /etc/systemd/system/aokeyd.service.d && cp "$share/dropin.conf" /etc/systemd/system/aokeyd.service.d/field.conf
		systemctl daemon-reload
	fi
	guide bird-config # aoctl validate, systemctl enable --now aokeyd
	wait_for 120 "aokeyd writes BIRD's include file" test -f "/etc/bird/aokeyd/$F.conf"
	# Debian's bird.service failed at boot on its default configuration
	# (no router ID on a host without addresses): the guide's restart
	# starts it.
	guide bird-include
	foreign_protocol
	bird3_setup
	guide frr-config "" "$RF"
	wait_for 120 "FRR's bgpd under aokeyd exec" test -s /run/frr/bgpd.pid
	# The operator's gobgpd, where the package's example unit runs it.
	install -m 0755 "$share/bin/gobgpd" /usr/local/bin/gobgpd
	guide gobgpd-config "" "$RG"
	far_end
	check "first start"
	guide status
	# Two events to a roll: reload and restart, upgrade and the speakers'
	# restart (each checked; the roll's completion after the second).
	roll; guide reload; systemctl reload $(instances) || fail "systemctl reload $(instances)"
	count reloads; check_up "systemctl reload aokeyd mid-roll"
	guide roll-status
	# /run/aokeyd holds the connect guards' sockets of the speakers under
	# `aokeyd exec` (FRR's bgpd, gobgpd), kept across aokeyd's restarts.
	touch /run/aokeyd/field-marker
	guide restart; systemctl restart $(instances) || fail "systemctl restart $(instances)"
	count restarts
	[ -e /run/aokeyd/field-marker ] || fail "systemctl restart aokeyd removed /run/aokeyd (RuntimeDirectoryPreserve)"
	check "systemctl restart aokeyd mid-roll"
	# An upgrade restarts every running aokeyd: the instances too, or they
	# would run the old binary on (each MainPID must change).
	before=$(mainpids)
	roll; (cd "$share/deb/2" && guide upgrade) || exit 1; count upgrades
	for u in aokeyd $(instances); do
		systemctl is-active --quiet "$u" || fail "after dpkg -i: $u is not running"
		was=$(printf '%s\n' "$before" | sed -n "s/^$u=//p")
		[ "$(systemctl show -p MainPID --value "$u")" != "$was" ] || fail "dpkg -i did not restart $u: it runs the old binary on"
	done
	check_up "dpkg -i of $(dpkg-query -W -f '${Version}' aokeyd) mid-roll (every instance restarted)"
	systemctl restart bird bird3 frr || fail "systemctl restart bird bird3 frr"
	count restarts; check_up "systemctl restart bird bird3 frr mid-roll"
	# In the same roll, a global revoke of the key the roll leaves (k
	# sends already; the old key is still accepted): written back into
	# /etc/aokeyd/keys.yaml; the roll then completes.
	n=$(get roll)
	for s in $SPEAKERS; do wait_for 120 "$s sends with k$n before the revoke" current_is "$s" "$n"; done
	guide revoke "s#core/k1#core/k$((n - 1))#"
	grep -q "name: k$((n - 1)),.*revoked: true" /etc/aokeyd/keys.yaml || fail "the revoke was not written back into /etc/aokeyd/keys.yaml"
	count revokes
	check "a global revoke with write-back mid-roll"
	roll; echo after-reboot >"$st/phase"; count reboots; rm -f "$st/running"; sync
	say "rebooting mid-roll"
	exit 100
	;;
after-reboot)
	say "back from the reboot: init=$(cat /proc/1/comm) kernel=$(uname -r)"
	# The boot's transaction had no ordering cycle: systemd breaks one by
	# dropping a start job (aokeyd's, with the package's first units and
	# Debian's frr.service, which is Before=network.target).
	cycles=$(journalctl -b -o cat --no-pager | grep -i 'ordering cycle')
	[ -z "$cycles" ] || fail "the boot met ordering cycles: $(printf '%s' "$cycles" | head -n 8 | tr '\n' ';')"
	for u in aokeyd $(instances) gobgpd-aokeyd bird bird3 frr; do
		wait_for 120 "$u running after the reboot" systemctl is-active --quiet "$u"
	done
	# The speakers came back keyed before any session: BIRD with the
	# keys aokeyd wrote before the reboot, FRR and gobgpd by their
	# aokeyd (nothing listened unsigned).
	for s in $SPEAKERS; do
		if timeout -k 5 20 ip netns exec fe probe unsigned "$F" "$(addr_of "$s")" >/dev/null 2>&1; then count unsigned; fail "after the reboot: $s took an unsigned connection"; fi
	done
	far_end
	check "a reboot mid-roll"
	migration
	echo purge >"$st/phase"
	guide purge
	for u in aokeyd $(instances); do
		systemctl is-active --quiet "$u" && fail "after dpkg --purge: $u still runs (its binary is gone)"
	done
	check "dpkg --purge aokeyd"
	printf 'field: init=systemd kernel=%s speakers=%s guide_steps=%s reloads=%s restarts=%s upgrades=%s reboots=%s stranded=%s unsigned_accepted=%s\n' \
		"$(uname -r)" "$(echo $SPEAKERS | tr ' ' ,)" "$(get guide_steps)" "$(get reloads)" "$(get restarts)" "$(get upgrades)" "$(get reboots)" "$(get stranded)" "$(get unsigned)"
	echo 0 >"$share/results/done"
	exit 0
	;;
esac
