// Package tcpaotest is an in-memory Linux TCP-AO kernel: sockets that
// implement tcpao.Socket with the rules of net/ipv4/tcp_ao.c (Linux 6.12),
// and a small network model that connects them and exchanges signed
// segments.
//
// What it models, and where in tcp_ao.c the rule comes from:
//
//   - TCP_AO_ADD_KEY (tcp_ao_add_cmd): address/prefix checks per socket
//     family (v4-mapped peers on AF_INET6 sockets become AF_INET keys), the
//     peer-consistency check on connected sockets, EEXIST when a key for an
//     overlapping peer (shorter of the two prefixes, any-address matches all)
//     and the same VRF has the same SendID or RecvID, EINVAL for
//     set_current/set_rnext on listeners and for an ifindex that is not a
//     VRF, EMSGSIZE for a MAC that does not fit the SYN, ENOMEM when
//     optmem_max would be reached (tcpao.KeyOptMem per key), EISCONN for the
//     first key on a socket that is neither closed nor listening. New keys go
//     to the head of the list, so GET_KEYS and the default key choice see the
//     newest key first.
//   - TCP_AO_DEL_KEY (tcp_ao_del_cmd, tcp_ao_delete_key): exact match on
//     SendID, RecvID, family, prefix, address, ifindex; EBUSY for
//     Current_key/RNext_key (after installing the named replacements, and
//     re-linking the key at the head), del_async only on listeners.
//   - TCP_AO_INFO and TCP_AO_GET_KEYS with their filters and counters.
//   - connect (tcp_connect, tcp_ao_connect_init): EKEYREJECTED without a key
//     for the peer (the socket is closed again but keeps the peer's address,
//     so later keys for other peers get EINVAL), non-matching keys dropped,
//     Current/RNext default to the first (newest) matching key.
//   - the handshake (tcp_inbound_hash, tcp_make_synack,
//     tcp_ao_copy_all_matching): unsigned SYNs to a listener with a key for the
//     peer (or ao_required) count ao_required and die, signed SYNs without a
//     key count key_not_found, bad MACs count pkt_bad; the SYN-ACK needs a key
//     whose SendID is the client's RNext; the accepted socket gets copies of
//     the listener keys that match the peer (in reverse order, counters
//     zero), Current by the client's RNextKeyID and RNext by its KeyID.
//   - established segments (tcp_inbound_ao_hash fast path): lookup by
//     RecvID, verification (same secret fingerprint, algorithm, MAC length
//     and key family, which picks the traffic-key KDF even on a v4-mapped
//     connection; the same option coverage only where it changes the hashed
//     bytes: in a SYN or SYN-ACK, or with a MAC padded by NOPs, since a
//     TCP-AO connection negotiates no timestamps while SACK is on), and the
//     switch of Current_key to the key whose SendID is the peer's
//     RNextKeyID. Each answer of an exchange is acknowledged at once, with
//     the key the answer may just have switched to.
//
// A connection that the real kernel would never establish returns
// ErrTimeout from Connect; a segment the real kernel would drop makes
// Exchange return ErrTimeout.
//
// The conformance package holds the model to the real kernel: a table of
// named cases and a seeded differential test that runs random operation
// sequences through both in the test VM (make test, make differential).
//
// Usage:
//
//	n := tcpaotest.NewNet()
//	l, _ := n.Socket(netip.MustParseAddr("127.0.0.1"))
//	_ = l.AddKey(k, tcpao.AddOptions{})
//	_ = l.Listen()
//	c, _ := n.Socket(netip.MustParseAddr("127.0.0.2"))
//	_ = c.AddKey(mirror, tcpao.AddOptions{})
//	a, err := n.Connect(c, l) // a is the accepted socket
//	err = n.Exchange(c, a, 3)
package tcpaotest
