package control

import "fmt"

// Key.TCPOptions values.
const (
	TCPOptionsInclude = "include"
	TCPOptionsExclude = "exclude"
)

// TCPOptions spells a key's TCP option flag for status.
func TCPOptions(exclude bool) string {
	if exclude {
		return TCPOptionsExclude
	}
	return TCPOptionsInclude
}

// ListenerCounters are the listening sockets' TCP-AO counters for one peer.
//
// The kernel counts per key (TCP_AO_GET_KEYS pkt_good/pkt_bad: a segment
// whose KeyID matched the key and whose MAC did or did not verify) and per
// socket (TCP_AO_INFO). Keys lists the listener keys whose prefix covers the
// peer's address; a key whose prefix also covers another peer of the
// speaker counts that peer's segments too (Shared), and only unshared keys
// are attributed to this peer. The socket counters (bad MAC, KeyID not
// found, TCP-AO missing, ICMP dropped) are the listeners' own and shared by
// every peer: a segment whose KeyID matches no key cannot be told apart by
// peer from these counters.
type ListenerCounters struct {
	Keys []ListenerKey `json:"keys"`
	// Socket counters, summed over the listening sockets; every peer's
	// segments count here.
	PktBad         uint64 `json:"pkt_bad"`
	PktKeyNotFound uint64 `json:"pkt_key_not_found"`
	PktAORequired  uint64 `json:"pkt_ao_required"`
	PktDroppedICMP uint64 `json:"pkt_dropped_icmp"`
	// VerifyFailing: the session is down and, since it went down (or
	// since aokeyd started managing the peer), segments from the peer
	// failed verification on an unshared listener key (WarnVerifyFailing).
	VerifyFailing bool `json:"verify_failing"`
	// KeyNotFound: the session is down and, since then, the listeners
	// counted segments whose KeyID matched no key (WarnKeyNotFound). The
	// kernel counts these per listening socket, not per peer: they are
	// this peer's when it is the only one down.
	KeyNotFound bool `json:"key_not_found"`
}

// ListenerKey is one listener key that covers the peer's address.
type ListenerKey struct {
	Socket     string `json:"socket"`
	Prefix     string `json:"prefix"`
	SendID     uint8  `json:"send_id"`
	RecvID     uint8  `json:"recv_id"`
	TCPOptions string `json:"tcp_options"`
	PktGood    uint64 `json:"pkt_good"`
	PktBad     uint64 `json:"pkt_bad"`
	// Shared: the prefix covers other peers of the speaker too; the
	// counters are theirs as much as this peer's.
	Shared bool `json:"shared"`
}

// WarnVerifyFailing is the warning for a peer whose session is down while
// its segments fail verification on the listener: a key with their KeyID
// is there, and the MAC does not match (bad MAC).
func WarnVerifyFailing(peer string) string {
	return fmt.Sprintf("segments from %s fail TCP-AO verification (bad MAC): the secret, the algorithm or tcp_options differ from the peer's key with the same IDs", peer)
}

// WarnKeyNotFound is the warning for a peer whose session is down while
// the listener counts segments whose KeyID matches no key it has (key not
// found): the peer sends with a key ID the listener has no key for.
func WarnKeyNotFound(peer string) string {
	return fmt.Sprintf("segments from %s name a key ID that no key on the listener has (key not found): the send and receive IDs are not mirrored (aokeyd's send-id is the peer's recv-id and the other way round)", peer)
}
