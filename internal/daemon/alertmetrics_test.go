package daemon_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aokeyd/aokeyd/internal/metrics"
)

// TestSendCoverageEndMetric: a scrape exports when each peer runs out of
// keys to send with; the test chain's key has no send end: +Inf.
func TestSendCoverageEndMetric(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: m})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up(ids(k1), k1)
		e.quiet(time.Second)
		mfs, err := m.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		v, ok := metricValue(t, mfs, metrics.NameSendCoverageEnd, map[string]string{"peer": peerAddr.String()})
		if !ok || !math.IsInf(v, 1) {
			t.Errorf("%s for %s: %v (found %t), want +Inf", metrics.NameSendCoverageEnd, peerAddr, v, ok)
		}
	})
}
