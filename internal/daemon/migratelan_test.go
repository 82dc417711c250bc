package daemon_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// lanPolicy binds two members of a peering LAN at consecutive addresses,
// 192.0.2.2 (chain core) and 192.0.2.3 (chain lan3), each with a key
// chain of its own.
const lanPolicy = `version: 1
safety:
  switch_timeout: 5m
  on_revoke_only_key: keep
key_chains:
  - name: core
  - name: lan3
peers:
  - neighbor: 192.0.2.2
    key_chain: core
  - neighbor: 192.0.2.3
    key_chain: lan3
`

var lanMember = netip.MustParseAddr("192.0.2.3")

// Two members of a peering LAN at consecutive addresses, both on TCP-MD5,
// with key IDs of their own, migrated by aoctl migrate --all (issue 52
// item 4): each one's TCP-AO keys go on the listener at 192.0.2.0/30,
// over the other's password (the kernel checks a TCP-AO prefix against
// TCP-MD5 at its network address only), neither member's unsigned SYN is
// taken at any step, and the member whose far end has not switched keeps
// connecting with TCP-MD5 while the other's migration completes. On the
// old rule (a covering prefix free of every other neighbor) both were
// refused: each is inside every prefix around the other.
func TestMigrateDenseLAN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw2, pw3 = "md5-Password-two", "md5-Password-three"
		k0, k1, _, _ := testKeys()
		k1.chain = "lan3"
		e := newEnv(t, envOptions{policy: lanPolicy, keys: []testKey{k0, k1}})
		e.src.setChainMD5("lan3", pw3, lanMember)
		e.setSourceKeysMD5(pw2, k0, k1)
		e.waitFor("both passwords on the listener", func() bool { return len(md5Of(t, e.lis, pw2, pw3)) == 2 })
		e.dialMD5(pw2)

		res, err := e.d.Migrate(context.Background(), control.MigrateRequest{All: true, Bound: control.Duration(3600e9)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range res.Migrations {
			got = append(got, m.Peer+" "+m.Prefix)
		}
		slices.Sort(got)
		if want := []string{"192.0.2.2 192.0.2.0/30", "192.0.2.3 192.0.2.0/30"}; !slices.Equal(got, want) {
			t.Fatalf("migrate --all started %q, want %q\nlogs:\n%s", got, want, e.logs.String())
		}
		e.waitFor("both members' TCP-AO keys beside both passwords", func() bool {
			return slices.Equal(listenerPrefixes(t, e.lis), []string{"192.0.2.0/30", "192.0.2.0/30"}) && len(md5Of(t, e.lis, pw2, pw3)) == 2
		})
		from := func(a netip.Addr, prep func(*tcpaotest.Sock) error) bool { return e.taken(a, e.lis, prep) }
		k1m := aoPrep(k1) // the mirror's peer is the listener's address, whichever member holds it
		for _, c := range []struct {
			name  string
			peer  netip.Addr
			prep  func(*tcpaotest.Sock) error
			taken bool
		}{
			{".2 unsigned", peerAddr, unsignedPrep, false},
			{".3 unsigned", lanMember, unsignedPrep, false},
			{".2 md5", peerAddr, md5Prep(pw2), true},
			{".3 md5", lanMember, md5Prep(pw3), true},
			{".2 tcp-ao", peerAddr, aoPrep(k0), true},
			{".3 tcp-ao", lanMember, k1m, true},
		} {
			if got := from(c.peer, c.prep); got != c.taken {
				t.Errorf("prepared: %s SYN taken = %v, want %v", c.name, got, c.taken)
			}
		}

		// .2's far end switches; .3's has not.
		e.dialWith(aoPrep(k0))
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatal(err)
		}
		e.waitFor(".2's migration done, its password gone", func() bool {
			st := e.peerStatus()
			return st.Migration != nil && st.Migration.Step == "done" && slices.Equal(md5Of(t, e.lis, pw2, pw3), []string{"192.0.2.3/32=" + pw3})
		})
		for _, c := range []struct {
			name  string
			peer  netip.Addr
			prep  func(*tcpaotest.Sock) error
			taken bool
		}{
			{".2 unsigned", peerAddr, unsignedPrep, false},
			{".2 md5", peerAddr, md5Prep(pw2), false},
			{".2 tcp-ao", peerAddr, aoPrep(k0), true},
			{".3 unsigned", lanMember, unsignedPrep, false},
			{".3 md5, its far end not switched", lanMember, md5Prep(pw3), true},
			{".3 tcp-ao", lanMember, k1m, true},
		} {
			if got := from(c.peer, c.prep); got != c.taken {
				t.Errorf("after .2's migration: %s SYN taken = %v, want %v", c.name, got, c.taken)
			}
		}
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatalf(".2's TCP-AO session after its migration: %v", err)
		}
		// The accepted socket took every listener key over .2 (the kernel
		// copies them all), .3's among them; what is not .2's leaves it.
		e.waitFor("the session holding .2's key alone", func() bool {
			ks, err := e.acc.Keys(tcpao.KeyFilter{})
			return err == nil && len(ks) == 1 && ks[0].SendID == k0.send && ks[0].RecvID == k0.recv
		})
	})
}

// setSourceKeysMD5 is setSourceKeys with chain core's password pw.
func (e *env) setSourceKeysMD5(pw string, keys ...testKey) {
	e.t.Helper()
	var mkts []keystore.MKT
	for _, k := range keys {
		mkts = append(mkts, k.mkt())
	}
	e.src.setMD5(pw, mkts...)
	for _, m := range mkts {
		m.Zero()
	}
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// A member whose chain holds a key due later with an ID of a neighbor's
// key under an overlapping prefix is refused at migrate time, naming the
// neighbor: the roll to that key would be a listener state the kernel
// refuses (EEXIST), one that stops the listener's sync for every peer.
// On the code before, only the keys due now were compared, and .3 started.
func TestMigrateDenseLANRefusesALaterClash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw2, pw3 = "md5-Password-two", "md5-Password-three"
		k0, k1, _, _ := testKeys()
		k1.chain = "lan3"
		later := testKey{name: "k9", send: k0.send, recv: 99, secret: "daemon-test-secret-k9-Qw3", sendStart: time.Now().Add(time.Hour),
			acceptStart: time.Now().Add(time.Hour), chain: "lan3"}
		e := newEnv(t, envOptions{policy: lanPolicy, keys: []testKey{k0, k1, later}})
		e.src.setChainMD5("lan3", pw3, lanMember)
		e.setSourceKeysMD5(pw2, k0, k1, later)
		e.waitFor("both passwords on the listener", func() bool { return len(md5Of(t, e.lis, pw2, pw3)) == 2 })

		res, err := e.d.Migrate(context.Background(), control.MigrateRequest{All: true, Bound: control.Duration(3600e9)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Migrations) != 1 || res.Migrations[0].Peer != "192.0.2.2" {
			t.Fatalf("migrate --all started %+v, want 192.0.2.2's alone", res.Migrations)
		}
		if !strings.Contains(e.logs.String(), "share a key ID") || !strings.Contains(e.logs.String(), "192.0.2.2's TCP-AO keys") {
			t.Fatalf("the refusal of 192.0.2.3 does not name the clash:\n%s", e.logs.String())
		}
	})
}
