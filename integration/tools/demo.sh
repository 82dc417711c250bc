#!/usr/bin/env bash
# make demo: boots the bundled TCP-AO kernel and shows, in a person's
# terms, gobgpd (or, with SPEAKER=frr, FRR's bgpd) managed by aokeyd and
# BIRD 2.17 peering with TCP-AO while aokeyd rolls to a freshly generated
# key live: `aoctl status` before, during and after. Runs on the embedded
# defaults (aokeyd init, demo policy) with one change: the keys come from a
# real HashiCorp Vault 1.21 dev server (integration/tools/vault.sh builds it
# once per machine; BUSL-1.1, a test dependency only, never shipped), and
# the roll's new key is written there. See integration/tools/demo-guest.sh
# for the steps.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
speaker=${SPEAKER:-gobgp}
case $speaker in
gobgp) router_a="gobgpd v3.37 + aokeyd" ;;
frr) router_a="FRR's bgpd (FRR 10.3 from Debian trixie, no TCP-AO of its own) + aokeyd" ;;
*) echo "demo: SPEAKER=$speaker (want gobgp or frr)" >&2; exit 2 ;;
esac
cat <<TXT
aokeyd demo
===========
TCP-AO (RFC 5925) needs a kernel built with CONFIG_TCP_AO. Stock kernels,
Debian's included, lack it (every TCP_AO setsockopt fails with ENOPROTOOPT),
so this demo boots a small bundled Linux 6.12 kernel with CONFIG_TCP_AO=y
under QEMU, with a Debian trixie root that brings BIRD 2.17 and FRR. The
first run builds both (about 10-15 minutes), and HashiCorp Vault 1.21 from
source (about 9 minutes more), and caches them under ~/.cache/aokeyd.

Inside the VM: router A = $router_a (keys from a
real Vault 1.21 dev server, KV v2, in A's namespace), router B = BIRD 2.17,
joined by a veth link.
TXT
export AOKEYD_GUEST_BINS
AOKEYD_GUEST_BINS="$(AOKEYD_GUEST_VAULT=1 bash "$repo/integration/tools/guest-bins.sh")"
AOKEYD_GUEST_CMD="SPEAKER=$speaker sh integration/tools/demo-guest.sh" AOKEYD_VM_TIMEOUT=${AOKEYD_VM_TIMEOUT:-900} \
	exec bash "$repo/integration/vm/run.sh"
