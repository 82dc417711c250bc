package daemon_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
)

// Two members' sessions come up one after the other, and the first one's
// take-over hangs in a kernel call (its accepted socket's first read). The
// second is taken over all the same, and the first once its call returns:
// take-overs run beside the speaker's events, not one after another. In
// the guest's dense-LAN migration (issue 52 item 4) every accepted socket
// held 81 to 197 keys of other members, each delete waited for an RCU
// grace period, and the tracker took the 200 sessions over at about 24 a
// minute: 121 migrations rolled back at their bound.
func TestHandoverDoesNotWaitForAnotherPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k0, k1, _, _ := testKeys()
		k1.chain = "lan3"
		e := newEnv(t, envOptions{policy: lanPolicy, keys: []testKey{k0, k1}})
		e.waitFor("both members' keys on the listener", func() bool { return len(keyIDs(t, e.lis)) == 2 })

		stall := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(stall) }) }
		defer release() // a failed wait must not leave the take-over hung
		first := e.memberSession(peerAddr, k0, stall)
		e.waitFor("192.0.2.2's session reported", func() bool { return e.logged("session established", peerAddr) })
		e.memberSession(lanMember, k1, nil)
		e.waitFor("192.0.2.3 taken over while 192.0.2.2's take-over hangs", func() bool {
			return e.logged("rotation machine started", lanMember)
		})
		if e.logged("rotation machine started", peerAddr) {
			t.Fatal("192.0.2.2's machine started before its accepted socket's read returned")
		}
		release()
		e.waitFor("192.0.2.2 taken over once its read returned", func() bool { return e.logged("rotation machine started", peerAddr) })
		if r, _ := first.calls(); r == 0 {
			t.Error("192.0.2.2's accepted socket was never read")
		}
	})
}

// memberSession connects a LAN member from addr with k's mirror, registers
// the accepted socket (whose first Info call waits for stall, when set) and
// reports the session Established.
func (e *env) memberSession(addr netip.Addr, k testKey, stall chan struct{}) *countingSocket {
	e.t.Helper()
	c, err := e.net.Socket(addr)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := aoPrep(k)(c); err != nil {
		e.t.Fatal(err)
	}
	acc, err := e.net.Connect(c, e.lis)
	if err != nil {
		e.t.Fatalf("connect from %s: %v", addr, err)
	}
	cs := e.disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), c.LocalAddr(), false)
	cs.mu.Lock()
	cs.stall = stall
	cs.mu.Unlock()
	e.sp.Set(bgp.PeerInfo{Neighbor: addr, Local: localAddr, LocalPort: bgpPort, RemotePort: c.LocalAddr().Port(),
		State: bgp.StateEstablished, Uptime: time.Now().Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
	return cs
}

// logged reports whether the daemon logged msg for the peer at addr (in no
// VRF): its peer field is the peer's key, address and VRF.
func (e *env) logged(msg string, addr netip.Addr) bool {
	want := peer.KeyOf(addr, "").String()
	for _, l := range strings.Split(e.logs.String(), "\n") {
		var r struct{ Msg, Peer string }
		if json.Unmarshal([]byte(l), &r) == nil && r.Msg == msg && r.Peer == want {
			return true
		}
	}
	return false
}
