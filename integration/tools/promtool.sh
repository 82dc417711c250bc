#!/usr/bin/env bash
# Prints the path of a promtool, fetching it once into the cache: the one
# Debian bookworm's `prometheus` package ships, extracted with dpkg-deb (the
# package is downloaded, never installed, so no Prometheus service starts).
# A promtool already on PATH is used as is.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
	command -v promtool
	exit 0
fi
ver=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq >&2
	ver=$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/tools/prometheus-${ver//[^A-Za-z0-9.+-]/_}"
bin="$dir/usr/bin/promtool"
if [ ! -x "$bin" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -qq "prometheus=$ver" >&2)
	mkdir -p "$dir.tmp"
	dpkg-deb -x "$tmp"/prometheus_*.deb "$dir.tmp"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
fi
echo "$bin"
