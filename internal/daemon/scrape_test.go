package daemon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aokeyd/aokeyd/internal/metrics"
)

// metricValue is the value of the series of family name whose labels
// include want (ok false: no such series).
func metricValue(t *testing.T, mfs []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestScrapeServesPolledCounters: a scrape serves each session's TCP-AO
// counters from what its rotation machine's last poll read, without a
// socket call, as long as that read is fresh (within two steady periods);
// the values are the poll's (segments exchanged after it do not show) and
// their age is exported. A session whose machine has not read its socket
// for longer (here: its steady read hangs in the kernel) is read once on
// the scrape, and shows the kernel's values with age 0.
func TestScrapeServesPolledCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg, metrics.Options{PerKey: true})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: m})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up(ids(k1), k1)
		if err := e.net.Exchange(e.client, e.acc, 3); err != nil {
			t.Fatal(err)
		}
		polled := info(t, e.acc) // the uncounted socket: what the next poll reads
		// One steady period (30s ±10%, rounded up to the second) passes:
		// the machine's steady read runs.
		e.quiet(34 * time.Second)
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatal(err)
		}
		now := info(t, e.acc)
		if now.PktGood == polled.PktGood {
			t.Fatalf("pkt_good %d after the second exchange, want more than %d", now.PktGood, polled.PktGood)
		}
		sock := map[string]string{"peer": peerAddr.String(), "socket": "established"}
		key := map[string]string{"peer": peerAddr.String(), "send_id": "20", "recv_id": "21"}
		peer := map[string]string{"peer": peerAddr.String()}

		scrape := func() (reads int, good, keyGood, bad, age float64) {
			t.Helper()
			r0, _ := e.accC.calls()
			mfs, err := m.Gatherer().Gather()
			if err != nil {
				t.Fatal(err)
			}
			r1, _ := e.accC.calls()
			var ok [3]bool
			good, ok[0] = metricValue(t, mfs, metrics.NameSocketPktGood, sock)
			bad, _ = metricValue(t, mfs, metrics.NameSocketPktBad, sock)
			keyGood, ok[1] = metricValue(t, mfs, metrics.NameKeyPktGood, key)
			age, ok[2] = metricValue(t, mfs, metrics.NamePeerCountersAge, peer)
			if ok != [3]bool{true, true, true} {
				t.Errorf("scrape lacks a series (socket pkt_good, key pkt_good, counters age found: %v)", ok)
			}
			if _, ok := metricValue(t, mfs, metrics.NameSpeakerSessionCache, map[string]string{"result": "hit"}); !ok {
				t.Errorf("scrape lacks %s{result=\"hit\"}: the tracker's cache counts are not wired", metrics.NameSpeakerSessionCache)
			}
			return r1 - r0, good, keyGood, bad, age
		}

		reads, good, keyGood, bad, age := scrape()
		if reads != 0 {
			t.Errorf("scrape right after a steady poll made %d socket reads, want 0", reads)
		}
		if good != float64(polled.PktGood) || keyGood != float64(polled.PktGood) || bad != float64(polled.PktBad) {
			t.Errorf("scrape exported pkt_good=%v key pkt_good=%v pkt_bad=%v, want the poll's %d, %d, %d (the kernel has %d now)",
				good, keyGood, bad, polled.PktGood, polled.PktGood, polled.PktBad, now.PktGood)
		}
		if age <= 0 || age > 34 {
			t.Errorf("counters age %vs, want the time since the poll (0, 34]", age)
		}

		// The next steady read hangs in the kernel; two steady periods
		// later the counters the machine read are stale.
		release := make(chan struct{})
		e.accC.mu.Lock()
		e.accC.stall = release
		e.accC.mu.Unlock()
		t.Cleanup(func() { close(release) })
		e.quiet(70 * time.Second)
		reads, good, keyGood, _, age = scrape()
		if reads != 2 {
			t.Errorf("scrape of a stale session made %d socket reads, want 2 (TCP_AO_INFO and TCP_AO_GET_KEYS once)", reads)
		}
		if good != float64(now.PktGood) || keyGood != float64(now.PktGood) {
			t.Errorf("stale session: scrape exported pkt_good=%v key pkt_good=%v, want the kernel's %d", good, keyGood, now.PktGood)
		}
		if age != 0 {
			t.Errorf("stale session read on the scrape: counters age %vs, want 0", age)
		}
	})
}
