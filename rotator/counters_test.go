package rotator

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestStatusCarriesPolledCounters: every read of the socket by the machine
// (the first step and each steady re-read) publishes its counters with the
// time of the read in the Status snapshot, so that metrics need not read
// the socket again.
func TestStatusCarriesPolledCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := mkKey(peerA, 1, 1, "alpha")
		ctl := NewController(Options{Config: Config{Steady: 10 * time.Second}, Rand: fixedJitter(0.5)})
		defer ctl.Close()
		ctl.SetDesired(pid("p"), Desired{Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1)})
		s := newEstablished(a)
		s.peerSends(1, 7)
		s.peerBadMAC(2)
		base, err := s.Info()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := ctl.Accepted(pid("p"), s); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		check := func(at time.Time, good, bad uint64) {
			t.Helper()
			c := ctl.Status()[0].Counters
			if !c.At.Equal(at) || !c.HaveAO || c.PktGood != good || c.PktBad != bad ||
				len(c.Keys) != 1 || c.Keys[0].SendID != 1 || c.Keys[0].RecvID != 1 {
				t.Errorf("status counters %+v, want read at %v with pkt_good=%d pkt_bad=%d and key 1/1", c, at, good, bad)
			}
		}
		good, bad := base.PktGood, base.PktBad // the handshake's segments, 7 good and 2 bad
		check(start, good, bad)
		s.peerSends(1, 2)
		time.Sleep(5 * time.Second) // before the steady re-read: still the first read's
		synctest.Wait()
		check(start, good, bad)
		time.Sleep(6 * time.Second) // the steady re-read at 10s (±10%: 0.5 is none)
		synctest.Wait()
		check(start.Add(10*time.Second), good+2, bad)
	})
}

// fixedJitter is a Jitter that always draws the same value.
type fixedJitter float64

func (j fixedJitter) Float64() float64 { return float64(j) }
