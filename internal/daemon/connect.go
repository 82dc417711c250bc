package daemon

import (
	"net/netip"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/tcpao"
)

// keysActiveOpens reports whether the speaker's own connects to the peer
// carry its keys: the speaker runs under aokeyd exec (Options.ActiveOpens)
// and the peer is in the default VRF, the only one ConnectKeys answers for.
func (d *Daemon) keysActiveOpens(info bgp.PeerInfo) bool {
	return d.o.ActiveOpens && info.VRF == ""
}

// ConnectKeys answers connectguard's question for one connect() of the
// speaker (pid) to dst: the keys the peer's socket must carry before the
// SYN leaves, with the preferred key as Current_key and RNext_key. ok is
// false for a destination that is not a managed TCP-AO peer on the BGP
// port: such connects proceed untouched. For a managed peer without keys
// yet (no good key read since aokeyd started) it answers ok with no keys,
// which makes connectguard fail the connect at once (EKEYREJECTED): an
// unsigned SYN would only be dropped by the peer and leave the speaker
// waiting out TCP's connect timeout, while a failed connect is retried
// after its connect-retry time. The keys are copies: the caller zeroes them.
func (d *Daemon) ConnectKeys(pid int, dst netip.AddrPort) (keys []tcpao.Key, current, rnext uint8, ok bool) {
	if dst.Port() != d.o.ListenPort {
		return nil, 0, 0, false
	}
	addr := dst.Addr().Unmap()
	// Connects carry no VRF here; the default VRF's binding applies.
	if _, err := d.policy().BindingFor(addr, ""); err != nil {
		return nil, 0, 0, false
	}
	snap, release := d.shared()
	defer release()
	if snap == nil {
		return nil, 0, 0, true
	}
	pk, err := d.peerDesired(d.policy(), snap, addr, "", d.o.Clock.Now())
	if err != nil || len(pk.Keys) == 0 {
		return nil, 0, 0, true
	}
	pref := pk.Preferred
	if pref < 0 {
		pref = 0
	}
	for _, k := range pk.Keys {
		keys = append(keys, k.TCPAOKey(hostPrefix(addr), 0))
	}
	return keys, pk.Keys[pref].MKT.SendID, pk.Keys[pref].MKT.RecvID, true
}
