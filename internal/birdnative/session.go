package birdnative

import (
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
	s := sessionOf(keys, last, ok)
	if record {
		d.lastGood[id] = s.read
	}
	return keys, s, nil
}

// sessionRead is one read of BIRD's session with a peer, kept as the
// next read's base.
type sessionRead struct {
	good map[ids]uint64 // each key's pkt_good
	// rnext is the session's RNext_key (hasRNext: it has one), and runs
	// how many reads in a row, ending with this one, found it so.
	rnext    ids
	hasRNext bool
	runs     int
}

// sessionOf is the session whose keys are keys, against last, the
// previous read (have: there is one). With no previous read (aokeyd
// started, or the session is new) there is no base: a key the peer sent
// with counts as rising, so no key it sent with leaves the file before a
// second read shows its count stopped (RetireProof's rule). A count below
// last's is another socket's (the session was re-established between two
// reads, its counts started again): no base either. The first read was
// taken for its own base once, which let such a key go at once
// (TestFirstReadRetiresNothing).
func sessionOf(keys []tcpao.KeyInfo, last sessionRead, have bool) *session {
	s := &session{read: sessionRead{good: make(map[ids]uint64, len(keys)), runs: 1}}
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
			s.read.runs = last.runs + 1
		}
	}
	return s
}
