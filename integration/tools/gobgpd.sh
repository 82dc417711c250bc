#!/usr/bin/env bash
# Installs gobgpd and the gobgp CLI v3.37.0 (unmodified upstream, built from the
# Go module) into ${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/bin if they are not
# there yet, and prints that directory. Used by .ci/run and by the gobgp
# scenario tests (integration/gobgp) on the host and, through
# AOKEYD_GUEST_BINS, in the TCP-AO guest.
#
#   bin=$(integration/tools/gobgpd.sh) && export AOKEYD_GOBGPD="$bin/gobgpd"
set -euo pipefail

version=v3.37.0
bin="${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/bin"
mkdir -p "$bin"

want() { # name: true when $bin/name is missing or another version
	local exe="$bin/$1"
	[[ -x "$exe" ]] || return 0
	"$exe" --version 2>/dev/null | grep -q "${version#v}" && return 1
	return 0
}

for cmd in gobgpd gobgp; do
	if want "$cmd"; then
		# Static binary so the same file runs in the Debian guest.
		CGO_ENABLED=0 GOBIN="$bin" GOFLAGS=-mod=mod \
			go install "github.com/osrg/gobgp/v3/cmd/$cmd@$version" >&2
	fi
done
echo "$bin"
