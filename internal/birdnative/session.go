package birdnative

import (
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
)

// readSession reads BIRD's established socket with the peer (nil, nil when
// there is none) and its keys' pkt_good against the previous pass's.
func (d *Driver) readSession(pid int, id peer.Key, record bool) ([]tcpao.KeyInfo, *session, error) {
	// The kernel is read without the lock: Status must not wait on it.
	keys, there, err := d.sessionKeys(pid, id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if !there {
		if record {
			delete(d.lastGood, id)
		}
		return nil, nil, nil
	}
	last, ok := d.lastGood[id]
	s := sessionOf(keys, last, ok, d.o.Now())
	if record {
		d.lastGood[id] = s.read
	}
	return keys, s, nil
}

// sessionRead is one read of BIRD's session with a peer, kept as the
// next read's base.
type sessionRead struct {
	good map[ids]uint64 // each key's pkt_good
	at   time.Time      // when it was read
	// rnext is the session's RNext_key (hasRNext: it has one), and since
	// when the reads in a row ending with this one found it so.
	rnext    ids
	hasRNext bool
	since    time.Time
}

// settleAfter is how long after the first read that found a key BIRD's
// RNext_key a later read is a base the retire proof may count from
// (session.settled): twice the network's delay, which the rotator takes
// to be shorter than its poll of a second.
const settleAfter = 2 * time.Second

// sessionOf is the session whose keys are keys, against last, the
// previous read (have: there is one). With no previous read (aokeyd
// started, or the session is new) there is no base: a key the peer sent
// with counts as rising, so no key it sent with leaves the file before a
// second read shows its count stopped (RetireProof's rule). A count below
// last's is another socket's (the session was re-established between two
// reads, its counts started again): no base either. The first read was
// taken for its own base once, which let such a key go at once
// (TestFirstReadRetiresNothing).
func sessionOf(keys []tcpao.KeyInfo, last sessionRead, have bool, now time.Time) *session {
	s := &session{read: sessionRead{good: make(map[ids]uint64, len(keys)), at: now, since: now}}
	for _, k := range keys {
		id := ids{k.SendID, k.RecvID}
		s.read.good[id] = k.PktGood
		if n, ok := last.good[id]; ok && n > k.PktGood {
			have = false
		}
		if k.IsCurrent {
			s.current, s.hasCurrent = id, true
		}
		if k.IsRNext {
			s.read.rnext, s.read.hasRNext = id, true
		}
	}
	s.good = s.read.good
	if have {
		s.before, s.base = last.good, last
		if s.read.hasRNext && last.hasRNext && last.rnext == s.read.rnext {
			s.read.since = last.since
		}
	}
	return s
}
