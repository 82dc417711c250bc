package daemon_test

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// A listener the speaker opens while a migration is prepared (a speaker
// restart) takes both kinds for the peer, TCP-MD5 first: the kernel
// refuses an MD5 key inside a TCP-AO prefix already on the socket
// (md5/ao-prefix-refuses-md5-host-inside), so with the TCP-AO prefix
// written first the peer's password never reached the new listener and
// its MD5 SYNs were refused until the migration ended (a lock-out, never
// an unsigned window). On the old order (TCP-AO, then TCP-MD5) the new
// listener held the prefix alone.
func TestMigrationNewListenerTakesBothKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw = "md5-Password-one"
		e := preparedEnv(t, pw)
		lis2, _ := listenOn(t, e.net, e.disc)
		e.d.Kick()
		e.waitFor("both kinds on the new listener", func() bool {
			return slices.Equal(listenerPrefixes(t, lis2), []string{"192.0.2.0/30"}) && len(md5Of(t, lis2, pw)) == 1
		})
		k0 := testKeys0()
		for _, c := range []struct {
			name  string
			prep  func(*tcpaotest.Sock) error
			taken bool
		}{{"unsigned", unsignedPrep, false}, {"md5", md5Prep(pw), true}, {"tcp-ao", aoPrep(k0), true}} {
			if got := e.taken(peerAddr, lis2, c.prep); got != c.taken {
				t.Errorf("new listener: %s SYN taken = %v, want %v", c.name, got, c.taken)
			}
		}
	})
}
