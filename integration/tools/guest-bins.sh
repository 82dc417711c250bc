#!/usr/bin/env bash
# Prints the host binaries the guest tests need in their PATH (and the
# Debian packages the install test takes from there): gobgpd and
# gobgp v3.37 (when the install script exists), aokeyd/aoctl built static, and
# promtool (Debian's, from the cache: the e2e alert test evaluates the
# shipped rules against a run's metrics in the guest). With
# AOKEYD_GUEST_VAULT=1, also HashiCorp Vault (integration/tools/vault.sh,
# built once per machine; BUSL-1.1, a test dependency only, never shipped)
# for the runs that want a real Vault in the guest (make demo, make chaos):
# 139 MB that the other guest runs need not copy.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# Per checkout (bin/ is ignored by git): two checkouts testing at once must
# not overwrite each other's daemon. AOKEYD_BUILD_TAGS builds aokeyd and
# aoctl with those tags, into a directory of their own (make chaos-mutant's
# deliberately broken aokeyd never replaces the real one).
tags=${AOKEYD_BUILD_TAGS:-}
out=$repo/bin/guest${tags:+-${tags//[^a-z0-9_]/_}}
mkdir -p "$out"
bins=()
if [ -x "$repo/integration/tools/gobgpd.sh" ] || [ -f "$repo/integration/tools/gobgpd.sh" ]; then
	dir=$(bash "$repo/integration/tools/gobgpd.sh")
	for b in gobgpd gobgp gobgpd-v4; do [ -x "$dir/$b" ] && bins+=("$dir/$b"); done
fi
for c in aokeyd aoctl; do
	if [ -d "$repo/cmd/$c" ] && ls "$repo/cmd/$c"/*.go >/dev/null 2>&1; then
		(cd "$repo" && CGO_ENABLED=0 GOWORK=off go build ${tags:+-tags "$tags"} -o "$out/$c" "./cmd/$c")
		bins+=("$out/$c")
	fi
done
# The Debian package and a rebuild of it under a higher version: the
# install, upgrade and purge test (integration/deb) finds them in PATH.
if [ -f "$repo/integration/tools/deb.sh" ] && [ -z "$tags" ]; then
	rm -rf "$out/deb"
	while read -r deb; do bins+=("$deb"); done < <(DEB_ARCHS=amd64 DEB_REBUILD=1 DEB_OUT="$out/deb" bash "$repo/integration/tools/deb.sh" 2>"$out/deb.log" || { cat "$out/deb.log" >&2; exit 1; })
fi
if [ -f "$repo/integration/tools/promtool.sh" ]; then
	bins+=("$(bash "$repo/integration/tools/promtool.sh")")
fi
if [ "${AOKEYD_GUEST_VAULT:-0}" = 1 ]; then
	bins+=("$(bash "$repo/integration/tools/vault.sh")")
fi
echo "${bins[*]:-}"
