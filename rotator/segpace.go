package rotator

import "time"

// segmentPace paces the polls of a roll's two waits for the peer's next
// segment (await: the peer sending with the announced key; retire's
// awaitNewKey: the peer seen sending with it after the grace period) by
// how far apart the peer's segments come. Nothing those waits look for
// can change before the peer's next segment, and a BGP peer sends one a
// keepalive interval apart when it has nothing else to say: polled every
// Config.Poll, a wait cost keepalive/Poll reads, each a borrow of the
// speaker's descriptor and two getsockopt calls, so a fleet whose
// keepalives are further apart (the speaker bench: 8 s at 1,024 peers, 1 s
// up to 256) paid twice aokeyd's CPU per peer per roll. Invariants:
//   - A wait polls at most a quarter of the peer's segment spacing after
//     its last poll, and never sooner than Config.Poll: a segment that
//     ends a wait is seen within max(Poll, spacing/4) of its arrival.
//   - The spacing is measured, never assumed: unknown (a new socket, no
//     segment between two reads yet) it is zero, and the waits poll every
//     Poll, as before.
//   - Only when the next read is taken changes: what a read decides, and
//     every deadline (the switch timeout), is as before; a deadline is
//     never polled later than it falls.
type segmentPace struct {
	// at is the read that last saw Info.PktGood rise (or the first read),
	// in Unix nanoseconds (0: none): 8 bytes, not a time.Time's 24, kept
	// the machine in its size class (TestPerPeerSizes).
	at   int64
	good uint64        // Info.PktGood at it
	gap  time.Duration // the peer's segments' spacing as last measured; 0 unknown
}

// paceDiv is the fraction of the peer's segment spacing a wait's poll
// interval may reach.
const paceDiv = 4

// observe takes a read of the machine's socket at now.
func (p *segmentPace) observe(obs *Observed, now time.Time) {
	if !obs.HaveAO {
		return
	}
	g := obs.Info.PktGood
	switch {
	case p.at == 0 || g < p.good: // the first read, or another socket's counters
		p.at, p.good, p.gap = now.UnixNano(), g, 0
	case g > p.good:
		p.gap = time.Duration(now.UnixNano()-p.at) / time.Duration(g-p.good)
		p.at, p.good = now.UnixNano(), g
	}
}

// next is when a wait for the peer's segment polls again after a poll at
// now that did not end it: Poll or a quarter of the spacing, whichever is
// longer, and no later than deadline (zero: none) when that is ahead.
func (p *segmentPace) next(now time.Time, poll time.Duration, deadline time.Time) time.Time {
	return p.nextAt(now, poll, p.gap, deadline)
}

// nextAt is next with the segments' spacing gap (0: poll every Poll).
func (p *segmentPace) nextAt(now time.Time, poll, gap time.Duration, deadline time.Time) time.Time {
	at := now.Add(max(poll, gap/paceDiv))
	if soon := now.Add(poll); !deadline.IsZero() && deadline.Before(at) {
		at = deadline
		if at.Before(soon) {
			at = soon // as every Poll: the first poll at or after the deadline
		}
	}
	return at
}
