#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, and nothing when it
# is already there: QEMU and debootstrap for the TCP-AO guest, the kernel
# build tools, iproute2 for the host network-namespace tests, spin for the
# roll protocol's model (make model). Needs root (or
# sudo) only when something is missing.
set -euo pipefail
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need qemu-system-x86_64 qemu-system-x86
need debootstrap debootstrap
need flex flex
need bison bison
need bc bc
need xz xz-utils
need cpio cpio
need ip iproute2
need make make
need gcc gcc
need spin spin # make model: the roll protocol's model checker
need yanglint libyang2-tools # make renderings: peer-config's YANG renderings
[ -e /usr/include/libelf.h ] || pkgs+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || pkgs+=(libssl-dev)
if [ ${#pkgs[@]} -eq 0 ]; then
	echo "deps: all present"
	exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
echo "deps: installing ${pkgs[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
