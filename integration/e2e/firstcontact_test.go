package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestFirstContact: three new peerings that never come up, BIRD's side
// configured wrongly from the start: (a) another secret, (b) tcp_options
// that differ (aokeyd's key excludes them, BIRD's includes them), (c) key
// IDs that are not mirrored. Once gobgpd's listener has counted the first
// failing SYN (read from the kernel, not through aokeyd), the first
// `aoctl status` of the run names the peer and the cause (bad MAC for (a)
// and (b), key not found for (c)) and the matching metric is 1. It prints
// "first-contact: cases=3 warned_first_look=3".
func TestFirstContact(t *testing.T) {
	kerneltest.Require(t)
	var mu sync.Mutex
	cases, warned := 0, 0
	cases3 := []struct {
		name         string
		a, bird      []key
		warn, metric string
	}{
		{"a_wrong_secret", []key{{i: 1, edited: true}}, []key{{i: 1, birdPreferred: true}},
			control.WarnVerifyFailing(addrB.String()), metrics.NamePeerVerifyFailing},
		{"b_tcp_options", []key{{i: 1, excludeOpts: true}}, []key{{i: 1, birdPreferred: true}},
			control.WarnVerifyFailing(addrB.String()), metrics.NamePeerVerifyFailing},
		{"c_ids_not_mirrored", []key{{i: 1}}, []key{{i: 2, birdPreferred: true}},
			control.WarnKeyNotFound(addrB.String()), metrics.NamePeerKeyNotFound},
	}
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases3 {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ok := runFirstContact(t, c.a, c.bird, c.warn, c.metric)
				mu.Lock()
				defer mu.Unlock()
				cases++
				if ok {
					warned++
				}
			})
		}
	})
	fmt.Printf("first-contact: cases=%d warned_first_look=%d\n", cases, warned)
	if cases != 3 || warned != cases {
		t.Fatalf("first contact: %d cases, %d warned at the first look", cases, warned)
	}
}

// runFirstContact runs one case and reports whether the first status
// warned as it should, with the metric set.
func runFirstContact(t *testing.T, a, birdKeys []key, warn, metric string) bool {
	l := newLab(t, a, birdKeys)
	k1 := a[0]
	// The first failing SYN after aokeyd put its key on the listener,
	// read from the kernel (never through aokeyd: no status call before
	// the first look).
	notFound := metric == metrics.NamePeerKeyNotFound
	lab.Eventually(t, 90*time.Second, "a failing SYN counted on gobgpd's listener", func() (bool, string) {
		keys, info := l.listenerState()
		have := slices.ContainsFunc(keys, func(k tcpao.KeyInfo) bool { return k.SendID == k1.sendID() })
		bad := slices.ContainsFunc(keys, func(k tcpao.KeyInfo) bool { return k.SendID == k1.sendID() && k.PktBad > 0 })
		if notFound {
			return have && info.PktKeyNotFound > 0, fmt.Sprintf("listener key %v, key_not_found %d", have, info.PktKeyNotFound)
		}
		return bad, fmt.Sprintf("listener key %v, its pkt_bad still 0", have)
	})
	rep, err := l.ctl.Status(context.Background(), "")
	if err != nil {
		t.Fatalf("the first status: %v", err)
	}
	var ps *control.PeerStatus
	for i := range rep.Peers {
		if rep.Peers[i].Peer == addrB.String() {
			ps = &rep.Peers[i]
		}
	}
	if ps == nil {
		t.Fatalf("the first status lists no peer %s: %+v", addrB, rep.Peers)
	}
	t.Logf("first status: session %s, warnings %q, listener %+v", ps.SessionState, ps.Warnings, ps.Listener)
	ok := ps.SessionState != "established" && slices.Contains(ps.Warnings, warn)
	if !ok {
		t.Errorf("the first status after the first failing SYN: warnings %q, want %q", ps.Warnings, warn)
	}
	want := fmt.Sprintf(`%s{peer="%s",vrf=""} 1`, metric, addrB)
	out, err := l.a.Run("wget", "-qO-", l.metricsURL)
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("metrics lack %q (%v)", want, err)
		ok = false
	}
	return ok
}

// listenerState reads gobgpd's listening sockets' keys and socket
// counters straight from the kernel.
func (l *testbed) listenerState() ([]tcpao.KeyInfo, tcpao.Info) {
	l.t.Helper()
	refs, err := sockets.System{}.Listeners(l.gobgp.PID, 179)
	if err != nil {
		l.t.Fatalf("gobgpd listeners: %v", err)
	}
	var keys []tcpao.KeyInfo
	var sum tcpao.Info
	for _, r := range refs {
		_ = sockets.System{}.With(r, func(fd int) error {
			s := tcpao.FromFD(fd)
			if in, err := s.Info(); err == nil {
				sum.PktBad += in.PktBad
				sum.PktKeyNotFound += in.PktKeyNotFound
			}
			ks, err := s.Keys(tcpao.KeyFilter{SkipFingerprint: true})
			keys = append(keys, ks...)
			return err
		})
	}
	return keys, sum
}
