package daemon_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestFirstContactWarnsAtFirstLook: a new peering that never comes up, its
// far end holding another secret (bad MAC) or other key IDs (no key found):
// the first status after the first failing SYN names the peer and the
// cause. The base the failures count from is taken when aokeyd starts
// managing the peer, not at the first status call (which then saw the
// failures already counted and warned only from the second look on).
func TestFirstContactWarnsAtFirstLook(t *testing.T) {
	k1 := testKey{name: "k1", send: 1, recv: 101, secret: "first-contact-secret-1"}
	cases := []struct {
		name  string
		far   tcpao.Key // the far end's key (its IDs are k1's mirror when right)
		warn  string
		gauge string // the metric set to 1
	}{
		{"wrong secret", func() tcpao.Key {
			m := k1.mirror()
			m.Secret = tcpao.NewSecret([]byte("not-the-secret-at-all"))
			return m
		}(),
			control.WarnVerifyFailing(peerAddr.String()), metrics.NamePeerVerifyFailing},
		{"IDs not mirrored", func() tcpao.Key { m := k1.mirror(); m.SendID, m.RecvID = 7, 8; return m }(),
			control.WarnKeyNotFound(peerAddr.String()), metrics.NamePeerKeyNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, err := metrics.New(prometheus.NewPedanticRegistry(), metrics.Options{})
				if err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: m})
				e.waitKeys("listener", e.lis, ids(k1))
				cl, err := e.net.Socket(peerAddr) // the far end
				if err != nil {
					t.Fatal(err)
				}
				if err := cl.AddKey(c.far, tcpao.AddOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.net.Connect(cl, e.lis); err == nil {
					t.Fatal("the far end with the wrong key connected")
				}
				rep, err := e.d.Status(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				var warnings []string
				for _, p := range rep.Peers {
					warnings = append(warnings, p.Warnings...)
				}
				if !slices.Contains(warnings, c.warn) {
					t.Errorf("first status after the failing SYN: warnings %q, want %q", warnings, c.warn)
				}
				mfs, err := m.Gatherer().Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{metrics.NamePeerVerifyFailing, metrics.NamePeerKeyNotFound} {
					want, got := 0.0, -1.0
					if name == c.gauge {
						want = 1
					}
					for _, mf := range mfs {
						if mf.GetName() == name && len(mf.GetMetric()) == 1 {
							got = mf.GetMetric()[0].GetGauge().GetValue()
						}
					}
					if got != want {
						t.Errorf("%s = %v at the first scrape, want %v", name, got, want)
					}
				}
				for _, w := range warnings {
					if w != c.warn && (strings.Contains(w, "key ID") || strings.Contains(w, "fail TCP-AO verification")) {
						t.Errorf("also warned %q: the other cause", w)
					}
				}
			})
		})
	}
}
