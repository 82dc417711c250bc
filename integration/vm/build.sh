#!/usr/bin/env bash
# Builds (or finds in the cache) the two artefacts the real-kernel tests boot:
#
#   kernel  a bzImage from Debian trixie's linux-source-6.12 package, tinyconfig
#           plus integration/vm/guest.config (CONFIG_TCP_AO=y and friends);
#   rootfs  a Debian trixie root made by debootstrap --variant=minbase with
#           bird2 (BIRD 2.17, the independent TCP-AO BGP speaker), frr (FRR
#           10.x, whose bgpd aokeyd keys from outside), iproute2 and busybox.
#
# Both live outside the checkout, under $AOKEYD_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd), keyed by a hash of what went into
# them, so a second run reuses them and a changed config rebuilds. On a fresh
# machine everything is built from scratch.
#
# The Debian mirror is read from this machine's own apt sources (override with
# AOKEYD_DEBIAN_MIRROR); no host name is written here.
#
# Usage: build.sh kernel|rootfs|all     prints KERNEL=... / ROOTFS=... lines
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${AOKEYD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aokeyd}
suite=trixie
kernel_pkg=linux-source-6.12
rootfs_pkgs=bird2,iproute2,busybox,procps
# Installed with apt inside the new root after debootstrap: debootstrap's own
# resolver takes the first alternative of every dependency and cannot order
# systemd's pre-dependency that frr pulls in (logrotate, cron-daemon-common).
rootfs_apt_pkgs=frr
# BIRD 3 (Debian's bird3 conflicts with bird2): its files extracted under
# /opt/bird3, for the native BIRD driver's tests of both lines.
rootfs_extract_pkgs=bird3
# Bump when the build steps change in a way the inputs below do not capture.
recipe=3

log() { printf 'vm-build: %s\n' "$*" >&2; }

debian_mirror() {
	if [ -n "${AOKEYD_DEBIAN_MIRROR:-}" ]; then
		echo "$AOKEYD_DEBIAN_MIRROR"
		return
	fi
	local f uri
	# deb822 sources: the first URIs: line that is not the security archive.
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		uri=$(awk 'tolower($1)=="uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" |
			grep -v -- '-security' | head -n 1 || true)
		if [ -n "$uri" ]; then echo "$uri"; return; fi
	done
	# One-line sources: "deb [opts] URI suite comp...".
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		uri=$(awk '$1=="deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i }' "$f" |
			grep -v -- '-security' | head -n 1 || true)
		if [ -n "$uri" ]; then echo "$uri"; return; fi
	done
	log "no Debian mirror found in /etc/apt/sources*; set AOKEYD_DEBIAN_MIRROR"
	return 1
}

need() {
	local missing=()
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
	if [ ${#missing[@]} -gt 0 ]; then
		log "missing tools: ${missing[*]} (run: make deps)"
		exit 1
	fi
}

hash_of() { cat "$@" | sha256sum | cut -c1-16; }

build_kernel() {
	local key dir work mirror
	key=$(printf '%s\n%s\n%s\n' "$recipe" "$kernel_pkg" "$suite" | cat - "$here/guest.config" | sha256sum | cut -c1-16)
	dir=$cache/kernel-$key
	if [ -s "$dir/bzImage" ]; then
		log "kernel cached: $dir"
		echo "KERNEL=$dir/bzImage"
		return
	fi
	need apt-get dpkg-deb make gcc flex bison bc xz
	mirror=$(debian_mirror)
	work=$cache/kernel-$key.work
	rm -rf "$work" "$dir.tmp"
	mkdir -p "$work/apt/lists/partial" "$work/apt/archives/partial" "$dir.tmp"
	log "building kernel $key from $kernel_pkg ($suite) — one-off, about 7-15 minutes on 2 cores"
	echo "deb $mirror $suite main" >"$work/apt/sources.list"
	local aptopts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=-"
		-o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt" -o "Dir::Cache::archives=$work/apt/archives"
		-o "APT::Get::List-Cleanup=0")
	apt-get -qq "${aptopts[@]}" update >&2
	(cd "$work" && apt-get -qq "${aptopts[@]}" download "$kernel_pkg" >&2)
	dpkg-deb -x "$work"/"$kernel_pkg"_*.deb "$work/pkg"
	mkdir -p "$work/src"
	tar -C "$work/src" --strip-components=1 -xf "$work"/pkg/usr/src/"$kernel_pkg".tar.xz
	local src=$work/src
	(
		cd "$src"
		make -s tinyconfig >&2
		scripts/kconfig/merge_config.sh -m .config "$here/guest.config" >&2
		make -s olddefconfig >&2
		for opt in TCP_AO TCP_MD5SIG NET_NS VETH INET_DIAG INET_TCP_DIAG SECCOMP_FILTER 9P_FS NET_9P_VIRTIO \
			CRYPTO_HMAC CRYPTO_SHA1 CRYPTO_SHA256 CRYPTO_CMAC CRYPTO_AES SMP IKCONFIG_PROC; do
			grep -q "^CONFIG_$opt=y" .config || { log "CONFIG_$opt did not survive olddefconfig"; exit 1; }
		done
		for opt in $(sed -n 's/^CONFIG_\([A-Z0-9_]*\)=y$/\1/p' "$here/guest.config"); do
			grep -q "^CONFIG_$opt=y" .config || log "note: CONFIG_$opt is not set in the final config"
		done
		nice -n 10 make -s -j"$(($(nproc) + 1))" bzImage >&2 # beside make test's field guest: it yields
	)
	cp "$src/arch/x86/boot/bzImage" "$src/.config" "$dir.tmp/"
	# The uAPI header the tcpao bindings mirror, and the kernel's own TCP-AO
	# selftests, kept beside the image for reference.
	cp "$src/include/uapi/linux/tcp.h" "$dir.tmp/tcp.h"
	tar -C "$src" -czf "$dir.tmp/tcp_ao-selftests.tar.gz" tools/testing/selftests/net/tcp_ao net/ipv4/tcp_ao.c include/net/tcp_ao.h
	(cd "$src" && make -s kernelrelease) >"$dir.tmp/release"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	rm -rf "$work"
	log "kernel built: $dir ($(cat "$dir/release"))"
	echo "KERNEL=$dir/bzImage"
}

build_rootfs() {
	local key dir mirror
	key=$(printf '%s\n%s\n%s\n%s\n%s\n' "$recipe" "$suite" "$rootfs_pkgs" "$rootfs_apt_pkgs" "$rootfs_extract_pkgs" | sha256sum | cut -c1-16)
	dir=$cache/rootfs-$key
	if [ -f "$dir/.aokeyd-rootfs-ok" ]; then
		log "rootfs cached: $dir"
		echo "ROOTFS=$dir"
		return
	fi
	need debootstrap
	mirror=$(debian_mirror)
	rm -rf "$dir.tmp"
	log "building $suite root with $rootfs_pkgs and $rootfs_apt_pkgs — one-off, about 5 minutes"
	debootstrap --variant=minbase --include="$rootfs_pkgs" "$suite" "$dir.tmp" "$mirror" >&2
	cp /etc/resolv.conf "$dir.tmp/etc/resolv.conf" 2>/dev/null || true
	chroot "$dir.tmp" env DEBIAN_FRONTEND=noninteractive apt-get -qq update >&2
	chroot "$dir.tmp" env DEBIAN_FRONTEND=noninteractive apt-get -qq -y --no-install-recommends install ${rootfs_apt_pkgs//,/ } >&2
	for p in ${rootfs_extract_pkgs//,/ }; do
		chroot "$dir.tmp" sh -c "cd /tmp && apt-get -qq download $p && dpkg-deb -x /tmp/${p}_*.deb /opt/$p && rm -f /tmp/${p}_*.deb" >&2
	done
	chroot "$dir.tmp" /opt/bird3/usr/sbin/bird --version >"$dir.tmp/.bird3-version" 2>&1 || true
	chroot "$dir.tmp" apt-get clean >&2
	# No init system runs in the guest; the harness's own init script does.
	mkdir -p "$dir.tmp/run/bird" "$dir.tmp/var/run/netns" "$dir.tmp/aokeyd"
	echo aokeyd-guest >"$dir.tmp/etc/hostname"
	chroot "$dir.tmp" /bin/busybox --install -s /usr/local/bin >&2 || true
	chroot "$dir.tmp" bird --version >"$dir.tmp/.bird-version" 2>&1 || true
	chroot "$dir.tmp" /usr/lib/frr/bgpd --version 2>&1 | head -n 1 >"$dir.tmp/.frr-version" || true
	mkdir -p "$dir.tmp/run/frr" "$dir.tmp/var/run/frr"
	rm -rf "$dir.tmp/var/cache/apt/archives"/*.deb
	touch "$dir.tmp/.aokeyd-rootfs-ok"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	log "rootfs built: $dir ($(cat "$dir/.bird-version"); $(cat "$dir/.bird3-version"); $(cat "$dir/.frr-version"))"
	echo "ROOTFS=$dir"
}

# The field guest (integration/field): what an operator runs, not what a
# test launches. Debian trixie with systemd as PID 1, booted from a disk
# image with Debian's own kernel package and initramfs: trixie-backports'
# linux-image (7.3.x, built with CONFIG_TCP_AO=y; trixie's own 6.12 is
# not). The speakers come as Debian packages under their own units and
# users: bird2 and frr installed; bird3 (trixie-backports), which conflicts
# with bird2, unpacked under /opt/bird3 and run by a copy of its own unit
# (integration/field/bird3.service). aokeyd itself is not in the image:
# the scenario installs the .deb from `make deb` with dpkg -i.
#
# Prints FIELD_KERNEL=, FIELD_INITRD=, FIELD_DISK= (an ext4 image the guest
# boots read-write through -snapshot, so the cached image never changes).
field_pkgs=systemd-sysv,udev,kmod,initramfs-tools,iproute2,procps,busybox,bird2,ca-certificates
field_apt_pkgs=frr
field_kernel=linux-image-cloud-amd64
field_suite_bpo=trixie-backports
field_recipe=2
build_field() {
	local key dir mirror
	key=$(printf '%s\n' "$field_recipe" "$suite" "$field_pkgs" "$field_apt_pkgs" "$field_kernel" "$field_suite_bpo" |
		cat - "$here/../field/bird3.service" | sha256sum | cut -c1-16)
	dir=$cache/field-$key
	if [ -f "$dir/.aokeyd-field-ok" ]; then
		log "field image cached: $dir"
		echo "FIELD_KERNEL=$dir/vmlinuz FIELD_INITRD=$dir/initrd.img FIELD_DISK=$dir/disk.ext4 FIELD_RELEASE=$(cat "$dir/release")"
		return
	fi
	need debootstrap mke2fs
	mirror=$(debian_mirror)
	local root=$dir.tmp/root
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	log "building the field image (systemd, $field_kernel from $field_suite_bpo, bird2, bird3, frr) — one-off, about 10 minutes"
	debootstrap --variant=minbase --include="$field_pkgs" "$suite" "$root" "$mirror" >&2
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	echo "deb $mirror $field_suite_bpo main" >"$root/etc/apt/sources.list.d/backports.list"
	local in=(chroot "$root" env DEBIAN_FRONTEND=noninteractive)
	"${in[@]}" apt-get -qq update >&2
	"${in[@]}" apt-get -qq -y --no-install-recommends install ${field_apt_pkgs//,/ } >&2
	"${in[@]}" apt-get -qq -y --no-install-recommends -t "$field_suite_bpo" install "$field_kernel" >&2
	"${in[@]}" sh -c "cd /tmp && apt-get -qq -t $field_suite_bpo download bird3 && dpkg-deb -x /tmp/bird3_*.deb /opt/bird3 && rm -f /tmp/bird3_*.deb" >&2
	install -m 0644 "$here/../field/bird3.service" "$root/etc/systemd/system/bird3.service"
	"${in[@]}" apt-get clean >&2
	rm -f "$root/etc/apt/sources.list.d/backports.list"
	rm -rf "$root/var/lib/apt/lists"/* "$root/var/cache/apt/archives"/*.deb
	echo aokeyd-field >"$root/etc/hostname"
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$root/etc/fstab"
	# A console to read on the serial line, no password: the guest has
	# no network to the outside and lives for one run.
	"${in[@]}" passwd -d root >&2
	# The entry unit: mounts the run's two disks (Debian's cloud kernel
	# has no 9p: the share, read-write, and the sources, read-only, are
	# ext4 images the runner makes) and runs the share's entry.sh.
	cat >"$root/etc/systemd/system/aokeyd-field.service" <<'UNIT'
[Unit]
Description=aokeyd field scenario (integration/field)
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /aokeyd/share /aokeyd/src && mount LABEL=aokeyd-share /aokeyd/share && mount -o ro LABEL=aokeyd-src /aokeyd/src && exec /bin/sh /aokeyd/share/entry.sh'
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
[Install]
WantedBy=multi-user.target
UNIT
	"${in[@]}" systemctl enable aokeyd-field.service >&2
	"${in[@]}" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >&2 || true
	local vmlinuz
	vmlinuz=$(ls "$root"/boot/vmlinuz-* | head -n 1)
	cp "$vmlinuz" "$dir.tmp/vmlinuz"
	cp "$root/boot/initrd.img-${vmlinuz##*/vmlinuz-}" "$dir.tmp/initrd.img"
	echo "${vmlinuz##*/vmlinuz-}" >"$dir.tmp/release"
	grep -q '^CONFIG_TCP_AO=y' "$root/boot/config-$(cat "$dir.tmp/release")" ||
		{ log "$field_kernel $(cat "$dir.tmp/release") lacks CONFIG_TCP_AO=y"; exit 1; }
	"${in[@]}" bird --version >"$dir.tmp/bird-version" 2>&1 || true
	"${in[@]}" /opt/bird3/usr/sbin/bird --version >"$dir.tmp/bird3-version" 2>&1 || true
	rm -f "$root/etc/resolv.conf"
	mke2fs -q -t ext4 -L aokeyd-field -d "$root" "$dir.tmp/disk.ext4" 3G >&2
	rm -rf "$root"
	touch "$dir.tmp/.aokeyd-field-ok"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	log "field image built: $dir (Linux $(cat "$dir/release"); $(cat "$dir/bird-version"); $(cat "$dir/bird3-version"))"
	echo "FIELD_KERNEL=$dir/vmlinuz FIELD_INITRD=$dir/initrd.img FIELD_DISK=$dir/disk.ext4 FIELD_RELEASE=$(cat "$dir/release")"
}

mkdir -p "$cache"
case "${1:-all}" in
field) build_field ;;
kernel) build_kernel ;;
rootfs) build_rootfs ;;
all)
	build_kernel
	build_rootfs
	;;
mirror) debian_mirror ;;
*)
	echo "usage: $0 kernel|rootfs|field|all|mirror" >&2
	exit 2
	;;
esac
