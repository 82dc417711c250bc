package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

func TestScheduleOffset(t *testing.T) {
	r := Rotation{Start: t0, Interval: 30 * Day, Lead: Day, Grace: Day, Jitter: 6 * time.Hour}
	s1, s1b, s2 := NewSchedule(r, []byte("seed-1")), NewSchedule(r, []byte("seed-1")), NewSchedule(r, []byte("seed-2"))
	differ, spread := 0, map[time.Duration]bool{}
	for i := range 200 {
		peer := netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)})
		o := s1.Offset(peer)
		if o < 0 || o >= r.Jitter {
			t.Fatalf("Offset(%s) = %v, want within [0, %v)", peer, o, r.Jitter)
		}
		if o2 := s1b.Offset(peer); o2 != o {
			t.Fatalf("Offset(%s) not reproducible: %v then %v", peer, o, o2)
		}
		if got := s1.Offset(netip.AddrFrom16(peer.As16())); got != o {
			t.Errorf("Offset of 4in6 %s = %v, want %v", peer, got, o)
		}
		if s2.Offset(peer) != o {
			differ++
		}
		spread[o/time.Hour] = true
	}
	if differ < 190 {
		t.Errorf("another seed changed only %d of 200 offsets", differ)
	}
	if len(spread) != 6 {
		t.Errorf("offsets of 200 peers fall in %d of the 6 jitter hours", len(spread))
	}
	r.Jitter = 0
	if o := NewSchedule(r, []byte("x")).Offset(addr("10.0.0.1")); o != 0 {
		t.Errorf("Offset without jitter = %v", o)
	}
}

func TestSchedulePlan(t *testing.T) {
	s := NewSchedule(Rotation{Start: t0, Interval: 30 * Day, Lead: Day, Grace: 2 * Day}, nil)
	peer := addr("192.0.2.1")
	tests := []struct {
		i                  int64
		send, accept       keystore.Lifetime
		indexAt, nextRotAt time.Duration
	}{
		{0, life(0, 32*Day), life(-Day, 32*Day), 0, 30 * Day},
		{2, life(60*Day, 92*Day), life(59*Day, 92*Day), 60 * Day, 90 * Day},
		{-1, life(-30*Day, 2*Day), life(-31*Day, 2*Day), -time.Nanosecond, 0},
	}
	for _, tt := range tests {
		pl := s.Plan(peer, tt.i)
		if pl.Index != tt.i || pl.SendLifetime != tt.send || pl.AcceptLifetime != tt.accept || !pl.SendStart.Equal(tt.send.Start) {
			t.Errorf("Plan(%d) = %+v, want send %v accept %v", tt.i, pl, tt.send, tt.accept)
		}
		tm := at(tt.indexAt)
		if got := s.Index(peer, tm); got != tt.i {
			t.Errorf("Index(%v) = %d, want %d", tm, got, tt.i)
		}
		if got := nextRotation(s, peer, tm); !got.Equal(at(tt.nextRotAt)) {
			t.Errorf("NextRotation(%v) = %v, want %v", tm, got, at(tt.nextRotAt))
		}
		if got := s.Current(peer, tm); got != pl {
			t.Errorf("Current(%v) = %+v, want %+v", tm, got, pl)
		}
	}
	// The key for rotation 1 is due at its accept start, 29d.
	if got := s.NextDue(peer, at(29*Day-1)); got.Index != 1 {
		t.Errorf("NextDue just before 29d = rotation %d, want 1", got.Index)
	}
	if got := s.NextDue(peer, at(29*Day)); got.Index != 2 {
		t.Errorf("NextDue at 29d = rotation %d, want 2", got.Index)
	}
}

// randomSchedule draws a well-formed rotation in whole seconds.
func randomSchedule(rng *rand.Rand) Rotation {
	iv := time.Duration(60+rng.Int64N(60*24*3600)) * time.Second
	below := func() time.Duration { return time.Duration(1+rng.Int64N(int64(iv/time.Second)-1)) * time.Second }
	return Rotation{
		Start: t0.Add(time.Duration(rng.Int64N(1e6)-5e5) * time.Second), Interval: iv,
		Lead: below(), Grace: below(), Jitter: below() - time.Second,
	}
}

func TestScheduleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		r := randomSchedule(rng)
		s := NewSchedule(r, []byte{byte(rng.IntN(256))})
		peer := netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		tm := r.Start.Add(time.Duration(rng.Int64N(int64(400*Day))) - 200*Day)
		i := s.Index(peer, tm)
		cur, next := s.Plan(peer, i), s.Plan(peer, i+1)
		if cur.SendStart.After(tm) || !next.SendStart.After(tm) {
			t.Fatalf("%+v peer %s t %v: rotation %d starts %v, next %v", r, peer, tm, i, cur.SendStart, next.SendStart)
		}
		if nr := nextRotation(s, peer, tm); !nr.Equal(next.SendStart) {
			t.Fatalf("NextRotation = %v, want %v", nr, next.SendStart)
		}
		if !cur.SendLifetime.Contains(tm) || !cur.AcceptLifetime.Contains(tm) {
			t.Fatalf("current rotation's lifetimes %v / %v do not contain %v", cur.SendLifetime, cur.AcceptLifetime, tm)
		}
		// Lead: the next key is accepted before it is sent with; grace:
		// the current key outlives the switch.
		if !next.AcceptLifetime.Start.Before(next.SendStart) || !cur.SendLifetime.End.After(next.SendStart) {
			t.Fatalf("no overlap around the switch: cur %+v next %+v", cur, next)
		}
		due := s.NextDue(peer, tm)
		if !due.AcceptLifetime.Start.After(tm) || s.Plan(peer, due.Index-1).AcceptLifetime.Start.After(tm) {
			t.Fatalf("NextDue(%v) = rotation %d accepted from %v", tm, due.Index, due.AcceptLifetime.Start)
		}
	}
}

// generated returns the MKTs a generator following s would have created for
// peer by the time tm: every rotation from first up to the one due next.
func generated(s Schedule, peer netip.Addr, first int64, tm time.Time) []keystore.MKT {
	var keys []keystore.MKT
	for i := first; i < s.NextDue(peer, tm).Index; i++ {
		pl := s.Plan(peer, i)
		id := uint8(uint64(i) % 256)
		m := mkt("gen", fmt.Sprintf("%s-%d", peer, i), id, id, pl.SendLifetime, pl.AcceptLifetime)
		m.Peers = []netip.Prefix{netip.PrefixFrom(peer, 32)}
		keys = append(keys, m)
	}
	return keys
}

// TestScheduleNoGap is the coverage property: with the keys a generator
// has created on schedule, at any instant the peer has exactly the current
// rotation's key as preferred send key, no ID clashes, and Validate finds
// nothing wrong.
func TestScheduleNoGap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for n := range 1000 {
		r := randomSchedule(rng)
		seed := fmt.Sprintf("seed-%d", n)
		src := fmt.Sprintf(`
safety: {switch_timeout: 1s}
key_chains:
  - name: gen
    rotation: {start: %s, interval: %s, lead: %s, grace: %s, jitter: %s}
peers:
  - {neighbor: 10.0.0.1, key_chain: gen}
  - {neighbor: 10.0.0.2, key_chain: gen}
`, r.Start.Format(time.RFC3339), FormatDuration(r.Interval), FormatDuration(r.Lead), FormatDuration(r.Grace), FormatDuration(r.Jitter))
		p := mustParse(t, src, WithJitterSeed([]byte(seed)))
		s, _ := p.Schedule("gen")
		tm := r.Start.Add(time.Duration(rng.Int64N(int64(100 * r.Interval))))
		var keys []keystore.MKT
		for _, peer := range []string{"10.0.0.1", "10.0.0.2"} {
			keys = append(keys, generated(s, addr(peer), s.Index(addr(peer), tm)-3, tm)...)
		}
		snap := snapshot(chain("gen", keys...))
		for _, peer := range []string{"10.0.0.1", "10.0.0.2"} {
			pk, err := p.Desired(snap, addr(peer), "", tm)
			if err != nil {
				t.Fatalf("%s\nDesired(%s, %v): %v", src, peer, tm, err)
			}
			want := fmt.Sprintf("%s-%d", peer, s.Index(addr(peer), tm))
			if k, ok := pk.PreferredKey(); !ok || k.MKT.Name != want {
				t.Fatalf("%s\nDesired(%s, %v) preferred %q (%v), want %s; keys %v", src, peer, tm, k.MKT.Name, ok, want, keyNames(pk))
			}
		}
		if probs := p.Validate(snap, tm, 10*r.Interval); probs != nil {
			t.Fatalf("%s\nValidate at %v: %v", src, tm, probs)
		}
	}
}

func BenchmarkScheduleNextRotation(b *testing.B) {
	s := NewSchedule(Rotation{Start: t0, Interval: 30 * Day, Lead: Day, Grace: Day, Jitter: 6 * time.Hour}, []byte("seed"))
	peer := addr("192.0.2.1")
	for b.Loop() {
		nextRotation(s, peer, at(1000*Day))
	}
}

// nextRotation is the first S(i) after t for peer: when the next key
// becomes the preferred send key (an oracle for the tests; the daemon asks
// Desired for its NextChange instead).
func nextRotation(s Schedule, peer netip.Addr, t time.Time) time.Time {
	off := s.Offset(peer)
	return s.sendStart(off, s.index(off, t)+1)
}
