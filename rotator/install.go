package rotator

import (
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// install runs the steady step's install, the plan's leading adds (ops),
// between the SessionGuard's Before and After, and reads the socket back
// (bare) into obs in the same borrow of its descriptor. When the step
// announces the new key next and nothing has to be written between the two
// (see announceWithInstall), the announce is made in that borrow too, and
// announced is true: one borrow (on bgp's sockets a pidfd_getfd, SO_COOKIE
// and close) and one pair of guard calls fewer per peer, at the moment a
// fleet-wide key change makes every peer's install at once. The guard's
// After then names the announce, the step's last write; the model makes
// the install and the announce in one step (roll.pml steady_). before is
// Current_key as the step's read found it.
func (m *machine) install(now time.Time, obs *Observed, ops []Op, before OptID) (announced bool, _ *AbortError) {
	want := m.desired.WantRNext
	maybe := want.Valid && m.oldRNext != want // the step announces after the install
	good := obs.Info.PktGood
	ae := m.guardedSteps(StepInstall, func() (Step, error) {
		step := StepInstall
		var announceErr error
		// The install and its bare read-back (the step plans nothing
		// from it); the announce in the same borrow when the read-back
		// allows it. A failed read-back leaves obs as it was: the step
		// sees no new key and polls.
		_, err := m.writeRead(now, ReadBare, obs, func(bs tcpao.Socket) error {
			_, err := applyOps(bs, ops, false)
			return err
		}, func(bs tcpao.Socket) {
			if !maybe || !announceWithInstall(obs, ops, before, good, want) {
				return
			}
			step = StepAnnounce
			m.writes++
			id := want.ID
			if announceErr = bs.SetInfo(tcpao.InfoChange{RNext: &id}); announceErr == nil {
				announced = true
				m.st.Counters = m.st.Counters.carrying(carriedKeyOf(findRecv(obs, id)))
			}
		})
		if err != nil {
			return StepInstall, err
		}
		return step, announceErr
	})
	if ae != nil {
		ae.Detail = string(ae.Step) + " failed"
		return false, ae
	}
	return announced, nil
}

// announceWithInstall reports whether the steady step, from the install's
// read-back obs, goes on to announce want with no other write first: the
// new key is there, RNext_key is not it yet, and checkOwnSwitch will not
// put Current_key back (ownMoveToUnused). good is the socket's pkt_good
// before the install, before its Current_key.
func announceWithInstall(obs *Observed, ops []Op, before OptID, good uint64, want OptID) bool {
	after, rnext := curOf(obs)
	if after != before && after.Valid && !peerMovedCurrent(obs, ops, good) && ownMoveToUnused(obs, before, after) {
		return false
	}
	return findRecv(obs, want.ID) != nil && rnext != want
}

// peerMovedCurrent: a move of Current_key seen in the install's read-back
// obs is the peer's (see checkOwnSwitch) when no write of ops names a
// Current_key and a segment of the peer's was verified since the step's
// read, whose pkt_good was good.
func peerMovedCurrent(obs *Observed, ops []Op, good uint64) bool {
	return !opsMoveCurrent(ops) && obs.Info.PktGood > good
}

// ownMoveToUnused: the install moved Current_key from before to after, a
// key the peer was never seen sending with, while before is still there:
// checkOwnSwitch puts before back.
func ownMoveToUnused(obs *Observed, before, after OptID) bool {
	k := findSend(obs, after.ID)
	return k != nil && k.PktGood == 0 && before.Valid && findSend(obs, before.ID) != nil
}

// checkOwnSwitch runs after the install step, which found Current_key at
// before. Installing a key must not move Current_key (the planner makes a
// forced delete name only a key the peer was seen to use): if the install
// moved it to a key the peer was never seen sending with, Current_key goes
// back to before at once; a move to a key the peer uses is kept but marked
// as this roll's own (ownCur). It returns why to abort, or nil.
//
// peerMoved says that the peer moved it: no write of the install named a
// Current_key (opsMoveCurrent) and a segment of the peer's was verified
// between the step's read and the install's read-back. The kernel moves
// Current_key by itself to the key a peer's segment names as its RNext
// when it holds that key (RFC 5925 7.5.2; tcp_inbound_ao_hash): a far end
// that asks for the new key ahead of the roll does so with its first
// segment after the add. That switch proves the peer holds the key (await)
// and stays: putting it back would cost the peer's next segment and a
// write, and would be reported as aokeyd's own move.
func (m *machine) checkOwnSwitch(now time.Time, before OptID, obs *Observed, peerMoved bool) *AbortError {
	after, _ := curOf(obs)
	if after == before || !after.Valid {
		return nil
	}
	if peerMoved {
		m.log.Debug("rotator: the peer's RNext moved Current_key during the install", "peer", m.st.Peer, "from", before, "to", after)
		return nil
	}
	m.ownCur = after
	if !ownMoveToUnused(obs, before, after) {
		return nil
	}
	back := before.ID
	m.ownWrite(now)
	m.log.Warn("rotator: installing moved Current_key to a key the peer was never seen to use; putting it back",
		"peer", m.st.Peer, "moved_to", after.ID, "back_to", back)
	if ae := m.guarded(StepRestore, func() error {
		_, err := m.writeRead(now, ReadFull, obs, func(s tcpao.Socket) error { return s.SetInfo(tcpao.InfoChange{Current: &back}) }, nil)
		return err
	}); ae != nil {
		ae.Detail = fmt.Sprintf("installing moved Current_key to send=%d, which the peer was never seen to use; putting send=%d back failed", after.ID, back)
		return ae
	}
	m.ownCur = OptID{}
	return nil
}

// opsMoveCurrent reports whether any of ops names a Current_key: the only
// writes of aokeyd's that move it.
func opsMoveCurrent(ops []Op) bool {
	for i := range ops {
		if ops[i].Kind == OpAdd && ops[i].Add.SetCurrent || ops[i].Kind == OpDel && ops[i].Del.SetCurrent ||
			ops[i].Kind == OpSetInfo && ops[i].Current.Valid {
			return true
		}
	}
	return false
}
