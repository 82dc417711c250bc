// Package gobgp holds the scenario tests of bgp/ against real gobgpd v3.37
// processes in network namespaces joined by veth (addresses 10.255.0.1/30
// and 10.255.0.2/30 exist only inside those namespaces):
//
//   - TestHostMD5 (host, root, gobgpd): inventory over gRPC, discovery of
//     gobgpd's listener and established socket by pid, a TCP_MD5SIG key set
//     through the pidfd_getfd duplicate taking effect on gobgpd's listener
//     (TCP-MD5 stands in for TCP-AO, which the host kernel lacks), the
//     tracker handing the accepted socket over, and the guard catching a
//     session reset.
//   - TestGuestAO (TCP-AO guest VM): TCP-AO keys on gobgpd's listener via
//     tcpao.FromFD; a peer with the right key establishes a BGP session, one
//     without is refused, and the accepted socket carries the keys.
//
// The namespaces, gobgpd and the waits come from integration/lab: gobgpd is
// found through $AOKEYD_GOBGPD, the cache directory that
// integration/tools/gobgpd.sh installs into, or $PATH. On the host, without
// root, `ip` or gobgpd the tests skip and say why (with CI=true a missing
// gobgpd is installed by running that script); in the guest they fail.
package gobgp
