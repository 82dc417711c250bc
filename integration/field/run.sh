#!/usr/bin/env bash
# The field guest (issue 48): aokeyd as an operator runs it. Boots the
# field image (integration/vm/build.sh field: Debian's own TCP-AO kernel
# package and initramfs, systemd as PID 1, Debian's bird2, bird3 and frr
# under their own units and users) under QEMU, hands it the aokeyd .deb
# from `make deb` (and a rebuild of it under a higher version, for the
# upgrade), gobgpd, and the conformance table's test binary, and runs
# integration/field/scenario.sh in it as a systemd unit. The guest
# reboots itself once (the scenario's reboot event); the run ends when it
# powers off.
#
#   AOKEYD_FIELD_ONLY   conformance|scenario: one part only (default both);
#                       defects: the package defects of issue 48, each
#                       checked and reported (scenario.sh defects)
#   AOKEYD_VM_TIMEOUT   seconds before the guest is killed (2400)
#   AOKEYD_VM_OUT       keep the share directory (logs, journal) here
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
timeout_s=${AOKEYD_VM_TIMEOUT:-2400}
log() { printf 'field: %s\n' "$*" >&2; }

if [ -n "${AOKEYD_FIELD_IMAGE:-}" ]; then # a directory with the four files, for work on the scenario
	FIELD_KERNEL=$AOKEYD_FIELD_IMAGE/vmlinuz FIELD_INITRD=$AOKEYD_FIELD_IMAGE/initrd.img
	FIELD_DISK=$AOKEYD_FIELD_IMAGE/disk.ext4 FIELD_RELEASE=$(cat "$AOKEYD_FIELD_IMAGE/release")
else
	eval "$(bash "$repo/integration/vm/build.sh" field)"
fi
: "${FIELD_KERNEL:?}" "${FIELD_INITRD:?}" "${FIELD_DISK:?}"

if [ -n "${AOKEYD_VM_OUT:-}" ]; then
	share=$AOKEYD_VM_OUT
	rm -rf "$share"
	mkdir -p "$share"
else
	share=$(mktemp -d /tmp/aokeyd-field.XXXXXX)
	trap 'rm -rf "$share"' EXIT
fi
mkdir -p "$share/bin" "$share/deb" "$share/results" "$share/logs"

# The packages: this tree's (AOKEYD_FIELD_DEB_REPO: another checkout's,
# e.g. an older commit's, to show a defect of its package), and the same
# build under a higher version (the upgrade).
debrepo=${AOKEYD_FIELD_DEB_REPO:-$repo}
deb1=$(cd "$debrepo" && DEB_ARCHS=amd64 DEB_OUT="$share/deb/1" bash integration/tools/deb.sh | head -n 1)
v1=$(dpkg-deb -f "$deb1" Version)
(cd "$debrepo" && DEB_ARCHS=amd64 DEB_OUT="$share/deb/2" DEB_VERSION="${v1%-1}+field1-1" bash integration/tools/deb.sh >/dev/null)
log "packages: $(basename "$deb1") and ${v1%-1}+field1-1"
gobgp=$(bash "$repo/integration/tools/gobgpd.sh")
cp "$gobgp/gobgpd" "$gobgp/gobgp" "$share/bin/"
# The conformance table, static, run against Debian's kernel.
(cd "$repo" && CGO_ENABLED=0 go test -c -o "$share/bin/conformance.test" ./tcpao/tcpaotest/conformance)
(cd "$repo" && CGO_ENABLED=0 go test -c -o "$share/bin/tcpao.test" ./tcpao)
(cd "$repo" && CGO_ENABLED=0 go build -o "$share/bin/probe" ./integration/field/probe)
echo "${AOKEYD_FIELD_ONLY:-}" >"$share/only"
# AOKEYD_FIELD_DROPIN: a drop-in for aokeyd.service the scenario installs
# before the first start (to get past one defect of an older package and
# show the next).
printf '%s' "${AOKEYD_FIELD_DROPIN:-}" >"$share/dropin.conf"
cp "$here/entry.sh" "$share/entry.sh"
# Debian's cloud kernel has no 9p: the share and the sources reach the
# guest as two small ext4 images (made without root from directories:
# mke2fs -d), the share's read back after the guest powered off.
disks=$(mktemp -d /tmp/aokeyd-field-disks.XXXXXX)
trap 'rm -rf "$disks"; [ -n "${AOKEYD_VM_OUT:-}" ] || rm -rf "$share"' EXIT
mkdir -p "$disks/src/integration" "$disks/src/tcpao" "$disks/src/keystore"
cp -r "$repo/integration/field" "$disks/src/integration/"
cp -r "$repo/tcpao/." "$disks/src/tcpao/"
cp -r "$repo/keystore/testdata" "$disks/src/keystore/"
mkdir -p "$disks/src/docs" && cp "$repo/docs/operations.md" "$disks/src/docs/"
mke2fs -q -t ext4 -L aokeyd-share -d "$share" "$disks/share.ext4" 2G
mke2fs -q -t ext4 -L aokeyd-src -d "$disks/src" "$disks/src.ext4" 256M

# One host thread runs both vCPUs (thread=single): with a thread each
# (QEMU 7.2's multi-threaded TCG) Debian's kernel once took an int3 it
# had already patched away (a static key's first flip, udp6_ehashfn, in
# gobgpd's connect) and panicked: "Oops: int3" on code that was a nop
# again. AOKEYD_FIELD_TCG_THREAD=multi brings the other mode back.
tcg_thread=${AOKEYD_FIELD_TCG_THREAD:-single}
log "booting Debian's $FIELD_RELEASE with systemd (TCG, thread=$tcg_thread)"
set +e
start=$(date +%s)
timeout -k 10 "$timeout_s" qemu-system-x86_64 -accel "tcg,thread=$tcg_thread" -cpu max -smp "${AOKEYD_VM_CPUS:-2}" -m "${AOKEYD_VM_MEM:-2048}" \
	-display none -monitor none -serial stdio \
	-kernel "$FIELD_KERNEL" -initrd "$FIELD_INITRD" \
	-append "console=ttyS0 root=/dev/vda rw panic=-1 systemd.show_status=error" \
	-drive file="$FIELD_DISK",format=raw,if=virtio,snapshot=on \
	-drive file="$disks/share.ext4",format=raw,if=virtio \
	-drive file="$disks/src.ext4",format=raw,if=virtio,readonly=on \
	-device virtio-rng-pci \
	</dev/null 2>&1 | sed -u 's/\r$//' | tee "$share/console.log"
qrc=${PIPESTATUS[0]}
set -e
log "the guest ran $(($(date +%s) - start))s (qemu exit $qrc)"
rm -rf "$share/results" "$share/logs"
debugfs -R "rdump /results /logs $share" "$disks/share.ext4" >/dev/null 2>&1 || log "could not read the share disk back"
fail=0
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	log "FAIL: the guest did not finish within ${timeout_s}s and was killed"
	fail=1
fi
for r in "$share"/results/*; do
	[ -f "$r" ] || continue
	st=$(cat "$r")
	[ "$st" = 0 ] || { log "FAIL: $(basename "$r"): exit $st"; fail=1; }
done
[ -f "$share/results/done" ] || { log "FAIL: the scenario never reported its end"; fail=1; }
# A panic reboots the guest (panic=-1): name it, with where it struck.
if grep -aq 'Kernel panic - not syncing\|Oops: ' "$share/console.log"; then
	log "FAIL: the guest's kernel oopsed or panicked: $(grep -a -m1 'Oops: \|Kernel panic' "$share/console.log" | cut -c1-160); $(grep -a -m1 'RIP: 0010:' "$share/console.log" | cut -c1-120)"
	fail=1
fi
# The scenario's result line, from its own log (the console may interleave
# kernel messages with it).
grep -a '^field: init=systemd ' "$share/logs/scenario.log" 2>/dev/null | tail -n 1 || true
grep -a '^field-defects: ' "$share/logs/scenario.log" 2>/dev/null | tail -n 1 || true
if [ "$fail" != 0 ] && [ -s "$share/logs/journal.txt" ]; then
	log "the guest's journal (tail):"
	tail -n 200 "$share/logs/journal.txt"
fi
exit $fail
