// Package integration holds the real-kernel harness and the end-to-end
// scenarios.
//
// integration/vm builds a Linux 6.12 kernel with CONFIG_TCP_AO=y from
// Debian's linux-source-6.12 package and a Debian trixie root (with BIRD
// 2.17) by debootstrap, caches both under ~/.cache/aokeyd, and boots them
// under QEMU to run test binaries as root. Tests that need that kernel call
// kerneltest.Require and skip on the host with a message saying so.
package integration
