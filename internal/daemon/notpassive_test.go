package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
)

// Status warns that an AO neighbor is not passive only when nothing keys
// its active opens: under `aokeyd exec` (Options.ActiveOpens) the speaker's
// connects to it carry keys, and a not-passive neighbor is fine.
func TestStatusNotPassiveWarning(t *testing.T) {
	cases := []struct {
		passive, activeOpens bool
		warn                 bool
	}{
		{passive: true, activeOpens: false, warn: false},
		{passive: false, activeOpens: false, warn: true},
		{passive: false, activeOpens: true, warn: false},
		{passive: true, activeOpens: true, warn: false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("passive=%t,exec=%t", c.passive, c.activeOpens), func(t *testing.T) {
			src := &fakeSource{}
			src.setKeys(testKey{name: "k1", send: 1, recv: 1, secret: "not-passive-test-secret"}.mkt())
			t.Cleanup(src.close)
			cache := keystore.NewCache(src, keystore.CacheOptions{})
			t.Cleanup(cache.Close)
			sp := bgptest.NewSpeaker("fake-speaker", speakerPID, 16,
				bgp.PeerInfo{Neighbor: peerAddr, Local: localAddr, State: bgp.StateActive, Passive: c.passive, PeerASN: 65002})
			d, err := daemon.New(daemon.Options{Policy: parsePolicy(t, fmt.Sprintf(basePolicy, "keep")), Keys: cache, Source: src,
				Speaker: sp, Discoverer: newFakeDiscoverer(), ListenPort: bgpPort, ActiveOpens: c.activeOpens})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := d.Status(context.Background(), peerAddr.String())
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Peers) != 1 {
				t.Fatalf("status peers %+v, want %s", rep.Peers, peerAddr)
			}
			if got := slices.Contains(rep.Peers[0].Warnings, control.WarnNotPassive); got != c.warn {
				t.Errorf("not-passive warning %t, want %t (warnings %q)", got, c.warn, rep.Peers[0].Warnings)
			}
		})
	}
}
