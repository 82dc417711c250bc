#!/usr/bin/env bash
# Installs gobgpd and the gobgp CLI v3.37.0, and gobgpd v4.8.0 as gobgpd-v4
# (unmodified upstream, built from the Go modules; v4.8.0 is the v4 served
# to this project's machines), into ${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/bin
# if they are not there yet, and prints that directory. Used by .ci/run and by the gobgp
# scenario tests (integration/gobgp) on the host and, through
# AOKEYD_GUEST_BINS, in the TCP-AO guest.
#
#   bin=$(integration/tools/gobgpd.sh) && export AOKEYD_GOBGPD="$bin/gobgpd"
set -euo pipefail

version=v3.37.0
bin="${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/bin"
mkdir -p "$bin"

want() { # name [version]: true when $bin/name is missing or another version
	local exe="$bin/$1" v=${2:-$version}
	[[ -x "$exe" ]] || return 0
	"$exe" --version 2>/dev/null | grep -q "${v#v}" && return 1
	return 0
}

for cmd in gobgpd gobgp; do
	if want "$cmd"; then
		# Static binary so the same file runs in the Debian guest.
		CGO_ENABLED=0 GOBIN="$bin" GOFLAGS=-mod=mod \
			go install "github.com/osrg/gobgp/v3/cmd/$cmd@$version" >&2
	fi
done
v4=v4.8.0
if want gobgpd-v4 "$v4"; then
	tmp=$(mktemp -d)
	CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod \
		go install "github.com/osrg/gobgp/v4/cmd/gobgpd@$v4" >&2
	mv "$tmp/gobgpd" "$bin/gobgpd-v4"
	rmdir "$tmp"
fi
echo "$bin"
