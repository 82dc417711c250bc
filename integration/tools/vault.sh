#!/usr/bin/env bash
# Prints the path of a HashiCorp Vault binary for the tests, building it once
# per machine from the wrapper module integration/tools/vault (Vault v1.21.0
# with the project's vault/api) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/tools/vault-<hash>/vault, where
# <hash> covers every input of the build: the wrapper's go.mod and go.sum,
# the build's flags (build=, below), and the Go version and platform.
# Changing any of them builds a new binary; an unchanged one is reused at
# once (editing this script's comments does not rebuild).
#
# Vault >= 1.15 is BUSL-1.1: it is a test dependency only (make vault-real,
# internal/vaultreal), never installed, packaged or shipped with aokeyd.
#
# It is Vault's minimal build (the build tag "minimal", Vault's own): the
# server, KV, AppRole, userpass, cert, JWT, transit, PKI and SSH, in-memory
# and raft storage, and none of the cloud, database and storage plugins the
# tests never mount (see docs/development.md). Run it in
# the background early:
#   AOKEYD_VAULT=$(integration/tools/vault.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mod="$here/vault"
# The build's settings: with the module graph, all that shapes the binary.
cgo=0 ldflags='-s -w' tags=minimal
key=$( {
	cat "$mod/go.mod" "$mod/go.sum"
	echo "CGO_ENABLED=$cgo -trimpath -tags=$tags -ldflags=$ldflags"
	go env GOVERSION GOOS GOARCH
} | sha256sum | cut -c1-16)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd/tools/vault-$key"
bin="$dir/vault"
mkdir -p "$dir"
# One build at a time: a second caller (make test's vault-real phase while
# the build it started in the background runs) waits for it and reuses it.
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$bin" ]; then
	tmp=$(mktemp "$dir/vault.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	# The wrapper module is not in go.work; its go.sum is committed, so the
	# build is reproducible (-mod=mod only lets go fill the module cache).
	(cd "$mod" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=$cgo nice -n 19 \
		go build -trimpath -tags="$tags" -ldflags="$ldflags" -o "$tmp" github.com/hashicorp/vault) >&2
	mv "$tmp" "$bin"
	trap - EXIT
fi
echo "$bin"
