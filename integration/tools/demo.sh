#!/usr/bin/env bash
# make demo: boots the bundled TCP-AO kernel and shows, in a person's
# terms, gobgpd (managed by aokeyd) and BIRD 2.17 peering with TCP-AO while
# aokeyd rolls to a freshly generated key live: `aoctl status` before,
# during and after. Runs on the embedded defaults (aokeyd init: file key
# source, demo policy). See integration/tools/demo-guest.sh for the steps.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cat <<'TXT'
aokeyd demo
===========
TCP-AO (RFC 5925) needs a kernel built with CONFIG_TCP_AO. Stock kernels,
Debian's included, lack it (every TCP_AO setsockopt fails with ENOPROTOOPT),
so this demo boots a small bundled Linux 6.12 kernel with CONFIG_TCP_AO=y
under QEMU, with a Debian trixie root that brings BIRD 2.17. The first run
builds both (about 10-15 minutes) and caches them under ~/.cache/aokeyd.

Inside the VM: router A = gobgpd v3.37 + aokeyd (keys from the embedded
default YAML key file), router B = BIRD 2.17, joined by a veth link.
TXT
export AOKEYD_GUEST_BINS
AOKEYD_GUEST_BINS="$(bash "$repo/integration/tools/guest-bins.sh")"
speaker=${SPEAKER:-gobgp}
case $speaker in gobgp | frr) ;; *) echo "demo: SPEAKER=$speaker (want gobgp or frr)" >&2; exit 2 ;; esac
AOKEYD_GUEST_CMD="SPEAKER=$speaker sh integration/tools/demo-guest.sh" AOKEYD_VM_TIMEOUT=${AOKEYD_VM_TIMEOUT:-900} \
	exec bash "$repo/integration/vm/run.sh"
