#!/bin/sh
# bgpd_wrap for FRR: start bgpd under `aokeyd exec`, so that the connections
# bgpd opens carry TCP-AO keys and its BGP listeners have theirs before they
# listen (aokeyd, run with -connectguard on the same socket, keys each
# connect() before its SYN and each listen() on port 179 before it takes
# one; bgpd's other connects and listens, to zebra's socket and on its vty,
# wait for aokeyd too and go on untouched). In /etc/frr/daemons (or
# /etc/frr/NAME/daemons for an FRR started with a pathspace, -N NAME):
#
#   bgpd_wrap="/usr/local/sbin/frr-bgpd-wrap"
#
# FRR's init script and watchfrr start (and restart) every daemon as
# "$wrap $bin -d $options"; with -d, bgpd returns once it is up (its vty
# socket listening). `aokeyd exec` must stay the parent of bgpd (it holds
# the connect filter's listener for as long as bgpd lives), so bgpd must
# not fork away from it: this wrapper drops -d, runs `aokeyd exec -- bgpd
# ...` in the background in its own session, and returns when that bgpd's
# vty socket listens, as -d would. Returning earlier makes watchfrr take a
# bgpd that is still starting for a failed restart: it restarts it again,
# stopping the one that was starting. bgpd writes its pid file as usual;
# watchfrr and aokeyd find it there.
#
# Environment: AOKEYD (default /usr/sbin/aokeyd), AOKEYD_CONNECTGUARD
# (default /run/aokeyd/connectguard.sock), AOKEYD_WRAP_LOG (default
# /dev/null: bgpd logs through its own configuration), AOKEYD_WRAP_WAIT
# (seconds to wait for bgpd's vty socket, default 60; after that the
# wrapper stops the launcher, and bgpd with it, and exits 1). While an
# `aokeyd exec` holds the socket, no second bgpd is started: the wrapper
# waits for the running one, as a second bgpd would fail on its pid file
# (the check and the launch hold a lock, SOCKET.lock, so two wrappers
# started at once start one bgpd); a launcher whose bgpd died (a restart
# right after a crash) is waited out, and a new bgpd started.
set -eu
aokeyd=${AOKEYD:-/usr/sbin/aokeyd}
sock=${AOKEYD_CONNECTGUARD:-/run/aokeyd/connectguard.sock}
log=${AOKEYD_WRAP_LOG:-/dev/null}
wait_s=${AOKEYD_WRAP_WAIT:-60}
[ $# -ge 1 ] || { echo "usage: $0 BGPD [ARGS]" >&2; exit 2; }
bin=$1
shift
# Drop -d (and --daemon), keep every other argument in order; note where
# the vty socket will be (FRR's --vty_socket and -N pathspace).
vtydir=/run/frr
pathspace=
n=$#
i=0
prev=
while [ "$i" -lt "$n" ]; do
	a=$1
	shift
	case $prev in
	-N | --pathspace) pathspace=$a ;;
	--vty_socket) vtydir=$a ;;
	esac
	case $a in
	--pathspace=*) pathspace=${a#*=} ;;
	--vty_socket=*) vtydir=${a#*=} ;;
	esac
	prev=$a
	case $a in -d | --daemon) ;; *) set -- "$@" "$a" ;; esac
	i=$((i + 1))
done
vty=$vtydir${pathspace:+/$pathspace}/$(basename "$bin").vty
listening() { ss -Hxl src "$1" 2>/dev/null | grep -q .; }
launcher=
# One wrapper at a time decides (watchfrr's start-up may run two start jobs
# for bgpd at once), and holds the lock until its launcher listens.
exec 9>>"$sock.lock"
flock 9
# A held socket without a listening vty is a launcher whose bgpd is still
# starting, or one on its way out: its bgpd died (watchfrr restarts bgpd
# at once, before the launcher has exited). Wait until either the vty
# listens (a bgpd is running) or the socket is free (start one).
t=0
while listening "$sock" && ! listening "$vty" && [ "$t" -lt $((wait_s * 10)) ]; do
	sleep 0.1
	t=$((t + 1))
done
if listening "$sock"; then
	# An `aokeyd exec` holds the socket: a bgpd is running or starting
	# (watchfrr may start one again while the first is still coming up). A
	# second launcher would take the socket path from the first, whose bgpd
	# would then wait for a supervisor forever; bgpd itself refuses a second
	# instance. Wait for the running one instead.
	echo "$0: $sock is held by a running aokeyd exec; not starting another bgpd" >&2
else
	setsid "$aokeyd" exec -socket "$sock" -- "$bin" "$@" </dev/null >>"$log" 2>&1 9>&- &
	launcher=$!
	t=0
	while ! listening "$sock" && kill -0 "$launcher" 2>/dev/null && [ "$t" -lt $((wait_s * 10)) ]; do
		sleep 0.1
		t=$((t + 1))
	done
fi
exec 9>&-
# Up when a socket listens on the vty path (a stale file of a killed bgpd
# does not count); failed when the launcher exits first, or after wait_s
# (the launcher, and bgpd with it, is stopped: no orphan is left waiting).
t=0
while ! listening "$vty"; do
	if [ -n "$launcher" ] && ! kill -0 "$launcher" 2>/dev/null; then
		echo "$0: bgpd under aokeyd exec exited before its vty socket $vty listened" >&2
		exit 1
	fi
	if [ "$t" -ge $((wait_s * 5)) ]; then
		echo "$0: bgpd's vty socket $vty not listening after ${wait_s}s (is aokeyd -connectguard $sock running? bgpd's connects wait for it)" >&2
		[ -z "$launcher" ] || kill "$launcher" 2>/dev/null || true
		exit 1
	fi
	sleep 0.2
	t=$((t + 1))
done
