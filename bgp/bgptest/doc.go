// Package bgptest provides a scripted bgp.Speaker and a bgp.Discoverer over
// registered tcpao.Sockets, for tests and benchmarks that drive the daemon
// without a BGP speaker process: the daemon reaches the sockets through
// daemon.Options.SocketOf (Discoverer.Socket), never through descriptors.
package bgptest
