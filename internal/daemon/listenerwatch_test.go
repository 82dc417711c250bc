package daemon_test

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// A listener the speaker opens while aokeyd runs (FRR applies frr.conf
// through vtysh seconds after bgpd started; gobgpd or bgpd restarted) has
// no keys, and the kernel takes an unsigned SYN from the peer's address on
// it. No session event and no input change comes with it, so without the
// listener watch the listener waited for the next resync (an hour here, 30
// s by default; 31 s in the field run). The watch (Options.ListenerPoll,
// 1 s by default) sees the new listener and asks for the pass that keys
// it: within two polls, and an unsigned SYN is dropped from then on. The
// watch alone runs no pass while the listeners stay the same.
func TestNewListenerKeyedWithinAPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}})
		e.waitKeys("listener", e.lis, ids(k1))
		e.quiet(10 * time.Second) // the start's passes are over
		_, full := e.d.Passes()
		e.quiet(10 * time.Second)
		if _, now := e.d.Passes(); now != full {
			t.Fatalf("%d full passes in 10s with the listeners unchanged, want none", now-full)
		}

		lis2, _ := listenOn(t, e.net, e.disc)
		opened := time.Now()
		if !testkit.Until(2*time.Second, func() bool { return slices.Equal(keyIDs(t, lis2), ids(k1)) }) {
			t.Fatalf("the new listener has keys %v %v after it opened, want %v within 2s (two polls)\nlogs:\n%s",
				keyIDs(t, lis2), time.Since(opened), ids(k1), e.logs.String())
		}
		unsigned, err := e.net.Socket(peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.net.Connect(unsigned, lis2); !errors.Is(err, tcpaotest.ErrTimeout) {
			t.Fatalf("an unsigned SYN from the peer to the new listener: %v, want it dropped (%v)", err, tcpaotest.ErrTimeout)
		}
	})
}
