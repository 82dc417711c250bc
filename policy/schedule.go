package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// Schedule is the pure plan of a generated rotation for one key chain.
//
// Rotation i of a peer starts sending at
//
//	S(i) = Start + Offset(peer) + i*Interval
//
// and the key generated for it gets
//
//	send lifetime   [S(i),        S(i+1) + Grace)
//	accept lifetime [S(i) - Lead, S(i+1) + Grace)
//
// so the new key is accepted Lead before anyone sends with it, the old key
// stays valid for sending and receiving Grace after the switch (while the
// controller waits for the peer to switch), and at every instant some key
// may be sent with. The key for rotation i must be in the key source by its
// accept start, S(i) - Lead.
type Schedule struct {
	Rotation
	seed []byte
}

// NewSchedule returns the schedule of r with the jitter seed seed (copied).
// The same seed gives the same plan on every run and every router.
func NewSchedule(r Rotation, seed []byte) Schedule {
	return Schedule{Rotation: r, seed: append([]byte(nil), seed...)}
}

// Planned is one rotation of a schedule.
type Planned struct {
	// Index is the rotation number i (negative before Start).
	Index int64
	// SendStart is S(i): when the key becomes the preferred send key.
	SendStart      time.Time
	SendLifetime   keystore.Lifetime
	AcceptLifetime keystore.Lifetime
}

// Offset is peer's jitter in [0, Jitter): a hash of the seed and the address
// (4-in-6 addresses count as IPv4).
func (s Schedule) Offset(peer netip.Addr) time.Duration {
	if s.Jitter <= 0 {
		return 0
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s.seed)))
	h.Write(n[:])
	h.Write(s.seed)
	h.Write(peer.Unmap().WithZone("").AsSlice())
	sum := h.Sum(nil)
	return time.Duration(binary.BigEndian.Uint64(sum[:8]) % uint64(s.Jitter))
}

// Index is the rotation in force for peer at t: the largest i with
// S(i) <= t.
func (s Schedule) Index(peer netip.Addr, t time.Time) int64 {
	return s.index(s.Offset(peer), t)
}

func (s Schedule) index(off time.Duration, t time.Time) int64 {
	if s.Interval <= 0 {
		return 0
	}
	d := t.Sub(s.Start.Add(off)) // saturates far from Start
	q := int64(d / s.Interval)
	if d%s.Interval < 0 {
		q--
	}
	return q
}

// Plan returns rotation i of peer.
func (s Schedule) Plan(peer netip.Addr, i int64) Planned {
	return s.plan(s.Offset(peer), i)
}

func (s Schedule) plan(off time.Duration, i int64) Planned {
	start := s.sendStart(off, i)
	next := start.Add(s.Interval)
	end := next.Add(s.Grace)
	return Planned{
		Index:          i,
		SendStart:      start,
		SendLifetime:   keystore.Lifetime{Start: start, End: end},
		AcceptLifetime: keystore.Lifetime{Start: start.Add(-s.Lead), End: end},
	}
}

// sendStart is S(i); i*Interval saturates at ±292 years.
func (s Schedule) sendStart(off time.Duration, i int64) time.Time {
	base := s.Start.Add(off)
	iv := int64(s.Interval)
	if iv <= 0 {
		return base
	}
	switch {
	case i > math.MaxInt64/iv:
		return base.Add(math.MaxInt64)
	case i < math.MinInt64/iv:
		return base.Add(math.MinInt64)
	}
	return base.Add(time.Duration(i * iv))
}

// Current is the rotation in force for peer at t.
func (s Schedule) Current(peer netip.Addr, t time.Time) Planned {
	return s.Plan(peer, s.Index(peer, t))
}

// NextDue is the first rotation of peer whose key is not due yet at t
// (accept start after t): the next key the generator has to create, and by
// when (its AcceptLifetime.Start).
func (s Schedule) NextDue(peer netip.Addr, t time.Time) Planned {
	return s.nextDue(s.Offset(peer), t)
}

func (s Schedule) nextDue(off time.Duration, t time.Time) Planned {
	// AcceptStart(i) = S(i) - Lead > t  <=>  S(i) > t + Lead.
	return s.plan(off, s.index(off, t.Add(s.Lead))+1)
}
