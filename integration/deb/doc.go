// Package deb tests aokeyd's Debian package as an operator installs it: in
// the TCP-AO guest, the package built by integration/tools/deb.sh (make
// deb) is installed with dpkg into an overlay of the guest's Debian root
// (the cached root itself stays as it was), its units are verified with
// systemd-analyze, the installed binaries run against a lab (gobgpd in one
// namespace, BIRD with the rendered keys in the other), a rebuild is
// installed over it as an upgrade, and the package is removed and purged.
package deb
