#!/bin/sh
# bgpd_wrap for FRR: start bgpd under `aokeyd exec`, so that the connections
# bgpd opens carry TCP-AO keys (aokeyd, run with -connectguard on the same
# socket, keys each connect() before its SYN). In /etc/frr/daemons:
#
#   bgpd_wrap="/usr/local/sbin/frr-bgpd-wrap"
#
# FRR's init script and watchfrr start (and restart) every daemon as
# "$wrap $bin -d $options" and expect the command to return at once. `aokeyd
# exec` must stay the parent of bgpd (it holds the connect filter's
# listener for as long as bgpd lives), so bgpd must not fork away from it:
# this wrapper drops -d, runs `aokeyd exec -- bgpd ...` in the background in
# its own session and returns. bgpd writes its pid file as usual; watchfrr
# and aokeyd find it there.
#
# Environment: AOKEYD (default /usr/sbin/aokeyd), AOKEYD_CONNECTGUARD
# (default /run/aokeyd/connectguard.sock), AOKEYD_WRAP_LOG (default
# /dev/null: bgpd logs through its own configuration).
set -eu
aokeyd=${AOKEYD:-/usr/sbin/aokeyd}
sock=${AOKEYD_CONNECTGUARD:-/run/aokeyd/connectguard.sock}
log=${AOKEYD_WRAP_LOG:-/dev/null}
[ $# -ge 1 ] || { echo "usage: $0 BGPD [ARGS]" >&2; exit 2; }
bin=$1
shift
# Drop -d (and --daemon), keep every other argument in order.
n=$#
i=0
while [ "$i" -lt "$n" ]; do
	a=$1
	shift
	case $a in -d | --daemon) ;; *) set -- "$@" "$a" ;; esac
	i=$((i + 1))
done
setsid "$aokeyd" exec -socket "$sock" -- "$bin" "$@" </dev/null >>"$log" 2>&1 &
