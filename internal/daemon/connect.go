package daemon

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// connector answers the connect guard for the speaker's own connects
// (aokeyd exec): the keys or TCP-MD5 password to sign each with. It owns
// the alternation between the keys offered to a lagging peer (tries).
type connector struct {
	*core
	tries connectTries // ConnectKeys' alternation per peer
}

// keysActiveOpens reports whether the speaker's own connects to the peer
// carry its keys: the speaker runs under aokeyd exec (Options.ActiveOpens)
// and the peer is in the default VRF, the only one ConnectKeys answers for.
func (cn *connector) keysActiveOpens(info bgp.PeerInfo) bool {
	return cn.o.ActiveOpens && info.VRF == ""
}

// connectKeys answers connectguard's question for one connect() of the
// speaker (pid) to dst: the keys the peer's socket must carry before the
// SYN leaves, with the key to sign it with as Current_key and RNext_key.
// ok is false for a destination that is not a managed TCP-AO peer on the
// BGP port: such connects proceed untouched. For a managed peer without
// keys (no good key read since aokeyd started, or none desired or kept)
// it answers ok with no keys, which makes connectguard fail the connect at
// once (EKEYREJECTED): an unsigned SYN would only be dropped by the peer
// and leave the speaker waiting out TCP's connect timeout, while a failed
// connect is retried after its connect-retry time. The keys are copies:
// the caller zeroes them.
//
// Never strand (rotator.PlanSocket's rule, for the connects aokeyd keys):
// besides the desired keys it offers the keys the peer's last session
// carried that are no longer desired (past their lifetime) but still in
// the key source, and when the peer was never seen sending with the
// preferred key but was with another one it offers, connects alternate
// between signing with that one and with the preferred key: a lagging peer
// that lacks the new key, and one that dropped the old key, each get a SYN
// they can verify. A key whose new material is held back (an edit in
// place) is not offered: aokeyd no longer has the installed material, and
// the new one would sign SYNs the peer may not verify (aoctl replace).
func (cn *connector) connectKeys(pid int, dst netip.AddrPort) (keys []tcpao.Key, current, rnext uint8, ok bool) {
	if dst.Port() != cn.o.ListenPort {
		return nil, 0, 0, false
	}
	dp, bound := cn.connectPeer(dst.Addr())
	if !bound {
		return nil, 0, 0, false
	}
	addr := dp.Neighbor
	snap, release := cn.shared()
	defer release()
	if snap == nil {
		return nil, 0, 0, true
	}
	pk, err := cn.recon.desiredOf(cn.policy(), snap, dp, time.Now())
	if err != nil {
		return nil, 0, 0, true
	}
	last, _ := cn.ctrl.LastRead(dp.Key())
	edited := func(send, recv uint8) bool {
		return slices.ContainsFunc(last.Kept, func(h rotator.Held) bool {
			return h.Why == rotator.ReasonEdited && h.Ref.SendID == send && h.Ref.RecvID == recv
		})
	}
	cands := make([]policy.ScheduledKey, 0, len(pk.Keys)+1)
	for _, k := range pk.Keys {
		if !edited(k.MKT.SendID, k.MKT.RecvID) {
			cands = append(cands, k)
		}
	}
	have := func(send, recv uint8) bool {
		return slices.ContainsFunc(cands, func(k policy.ScheduledKey) bool { return k.MKT.SendID == send && k.MKT.RecvID == recv })
	}
	// The keys the last session carried, kept past their lifetime.
	if c := snap.Chains[pk.SourceChain]; c != nil {
		for _, r := range last.Counters.Carried {
			if have(r.SendID, r.RecvID) || edited(r.SendID, r.RecvID) {
				continue
			}
			for _, m := range c.Keys {
				if m.SendID == r.SendID && m.RecvID == r.RecvID && !m.Revoked && !slices.Contains(pk.Revoked, m.Name) {
					inc := m.IncludeTCPOptions
					if pk.Binding.IncludeTCPOptions != nil {
						inc = *pk.Binding.IncludeTCPOptions
					}
					cands = append(cands, policy.ScheduledKey{MKT: m, IncludeTCPOptions: inc})
					break
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil, 0, 0, true
	}
	sign := 0
	if pref, ok := pk.PreferredKey(); ok && have(pref.MKT.SendID, pref.MKT.RecvID) {
		sign = slices.IndexFunc(cands, func(k policy.ScheduledKey) bool { return k.MKT.Name == pref.MKT.Name })
	}
	if seen := seenKey(last.Counters, cands); seen >= 0 && seen != sign && !sentWith(last.Counters, cands[sign]) && cn.tries.alternate(addr) {
		sign = seen
	}
	// The connect guard adds them on the speaker's new socket: aokeyd's
	// keys, recorded before they leave (owned.go).
	p := cn.owns.owner(pid).p
	for _, k := range cands {
		tk := k.TCPAOKey(hostPrefix(addr), 0)
		cn.owns.record(p, 0, tk.KeyRef, tk.Secret.Fingerprint(), false)
		keys = append(keys, tk)
	}
	return keys, cands[sign].MKT.SendID, cands[sign].MKT.RecvID, true
}

// connectPeer is the peer a connect to dst reaches, with its address
// without a zone (Neighbor), and whether a binding covers it. Connects
// carry no VRF here; the default VRF's bindings apply. The neighbor at the
// address when an address binding covers it; else, for a link-local
// destination with its link (the zone connect() gave: parseSockaddr), the
// interface neighbour on that link, when its binding keys it
// (core.bindingOf: the address it learned is dst). Before the speaker's
// report of the address reaches aokeyd, the connect is the neighbour's
// all the same: its link binding's keys for dst, never an unsigned SYN.
func (cn *connector) connectPeer(dst netip.Addr) (bgp.PeerInfo, bool) {
	dst = dst.Unmap()
	addr := dst.WithZone("")
	if _, err := cn.policy().BindingFor(addr, ""); err == nil {
		return bgp.PeerInfo{Neighbor: addr}, true
	}
	if dst.Zone() == "" || !addr.IsLinkLocalUnicast() {
		return bgp.PeerInfo{}, false
	}
	p := bgp.PeerInfo{Link: peer.LinkOf(linkName(dst.Zone())), Neighbor: addr}
	if _, err := cn.bindingOf(p); err != nil {
		return bgp.PeerInfo{}, false
	}
	return p, true
}

// linkName is the name of the interface a zone names: its ifindex in
// decimal (connect()'s scope id), or a name already.
func linkName(zone string) string {
	if n, err := strconv.Atoi(zone); err == nil {
		if ifi, err := net.InterfaceByIndex(n); err == nil {
			return ifi.Name
		}
	}
	return zone
}

// sentWith reports whether the last read of the session found the peer
// sending with k (its pkt_good above zero).
func sentWith(c rotator.Counters, k policy.ScheduledKey) bool {
	return slices.ContainsFunc(c.Keys, func(kc rotator.KeyCounters) bool {
		return kc.SendID == k.MKT.SendID && kc.RecvID == k.MKT.RecvID && kc.PktGood > 0
	})
}

// seenKey is the index in cands of a key the last read found the peer
// sending with, -1 when none.
func seenKey(c rotator.Counters, cands []policy.ScheduledKey) int {
	return slices.IndexFunc(cands, func(k policy.ScheduledKey) bool { return sentWith(c, k) })
}

// connectTries alternates, per peer, the key a connect is signed with
// (ConnectKeys) between the one the peer last authenticated with and the
// preferred one, when they differ.
type connectTries struct {
	mu sync.Mutex
	n  map[netip.Addr]uint64
}

// alternate reports whether this connect to addr signs with the key the
// peer last authenticated with: the first, third, ... since the peer was
// first asked about.
func (c *connectTries) alternate(addr netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[netip.Addr]uint64{}
	}
	n := c.n[addr]
	c.n[addr] = n + 1
	return n%2 == 0
}

// connectMD5 answers connectguard's first question for one connect() of
// the speaker (pid) to dst: the TCP-MD5 password to sign it with, when the
// peer still runs TCP-MD5 (its chain holds a password and no migration
// has reached its switch time; after a roll-back TCP-MD5 again). The key
// is a copy the caller zeroes. false: ask ConnectKeys.
func (cn *connector) connectMD5(pid int, dst netip.AddrPort) (tcpao.MD5Key, bool) {
	if dst.Port() != cn.o.ListenPort {
		return tcpao.MD5Key{}, false
	}
	addr := dst.Addr().Unmap().WithZone("")
	if _, err := cn.policy().BindingFor(addr, ""); err != nil {
		return tcpao.MD5Key{}, false
	}
	if r, ok := cn.migrs.migrationOf(addr, ""); ok && (r.Step == migrate.Switching || r.Step == migrate.Done) {
		return tcpao.MD5Key{}, false // the far end takes TCP-AO now
	}
	snap, release := cn.shared()
	defer release()
	if snap == nil {
		return tcpao.MD5Key{}, false
	}
	pk, err := cn.recon.peerDesired(cn.policy(), snap, addr, "", time.Now())
	if err != nil || !md5Peer(pk) {
		return tcpao.MD5Key{}, false
	}
	return pk.MD5.Key(hostPrefix(addr), 0), true
}
