package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/rotator"
)

var _ control.RollWatcher = (*Daemon)(nil)

// maxRollSteps is how many steps the journal keeps per peer: a roll takes
// four (started, announced, switched, completed), an abort two.
const maxRollSteps = 8

// rollJournal keeps the last steps of each peer's rolls, from the
// rotator's events and the sessions going down, for aoctl rotate --wait
// (GET /v1/rolls). A step names its key by IDs; Rolls names them from the
// key source when it answers.
type rollJournal struct {
	mu    sync.Mutex
	seq   uint64
	steps map[rotator.PeerID][]storedStep
	// rolling marks a peer whose roll started and has not ended.
	rolling map[rotator.PeerID]bool
	// changed is closed, and replaced, at every step.
	changed chan struct{}
}

// journalStep is one step, with its key's IDs (send alone when only the
// Current_key's SendID is known).
type journalStep struct {
	seq        uint64
	at         time.Time
	kind       control.RollStepKind
	state      rotator.State
	send, recv uint8
	key        keyIDs
	reason     string
	detail     string
}

// storedStep is a journalStep as the journal keeps it: 32 bytes, not
// 104 (a peer keeps up to maxRollSteps of them, 4,096 peers or more).
// The kind and the state are indexes in stepKinds and stepStates, the
// time is Unix nanoseconds (0: the zero time), and the reason and the
// detail, which few steps have, sit apart (note, nil when both are "").
type storedStep struct {
	seq        uint64
	at         int64
	note       *stepNote
	kind       uint8
	state      uint8
	send, recv uint8
	key        keyIDs
}

// stepNote is a stored step's words; state is the step's state when it
// is none of stepStates.
type stepNote struct {
	reason, detail string
	state          rotator.State
}

// stepKinds and stepStates are what a stored step's kind and state index.
var (
	stepKinds = [...]control.RollStepKind{"", control.RollStarted, control.RollAnnounced, control.RollSwitched,
		control.RollCompleted, control.RollAborted, control.RollReplanned, control.RollSessionDown, control.RollSessionUp}
	stepStates = [...]rotator.State{"", rotator.StateSteady, rotator.StateAnnounced, rotator.StateGrace,
		rotator.StateBackoff, rotator.StateDown}
)

// store is s as the journal keeps it.
func (s journalStep) store() storedStep {
	t := storedStep{seq: s.seq, send: s.send, recv: s.recv, key: s.key}
	if !s.at.IsZero() {
		t.at = s.at.UnixNano()
	}
	t.kind = uint8(max(0, slices.Index(stepKinds[:], s.kind)))
	i := slices.Index(stepStates[:], s.state)
	t.state = uint8(max(0, i))
	if s.reason != "" || s.detail != "" || i < 0 {
		t.note = &stepNote{reason: s.reason, detail: s.detail}
		if i < 0 {
			t.note.state = s.state
		}
	}
	return t
}

// step is t as the journal gives it.
func (t storedStep) step() journalStep {
	s := journalStep{seq: t.seq, kind: stepKinds[t.kind], state: stepStates[t.state], send: t.send, recv: t.recv, key: t.key}
	if t.at != 0 {
		s.at = time.Unix(0, t.at)
	}
	if t.note != nil {
		s.reason, s.detail = t.note.reason, t.note.detail
		if t.note.state != "" {
			s.state = t.note.state
		}
	}
	return s
}

// keyIDs says which of a step's IDs are known.
type keyIDs uint8

const (
	noKey    keyIDs = iota
	bothIDs         // send and recv
	sendOnly        // Current_key's SendID
)

// stepOf maps a rotator event to a journal step; ok false for an event
// that is no step of its own (the backoff after an abort, the steady
// after a completion).
func (j *rollJournal) stepOf(e rotator.Event) (journalStep, bool) {
	s := journalStep{at: e.At, state: e.State}
	if e.HavePending {
		s.send, s.recv, s.key = e.Pending.SendID, e.Pending.RecvID, bothIDs
	}
	rolling := j.rolling[e.Peer]
	switch e.Kind {
	case rotator.EventRollStarted:
		s.kind = control.RollStarted
		j.rolling[e.Peer] = true
	case rotator.EventRollAborted:
		s.kind, s.reason, s.detail = control.RollAborted, e.Reason.String(), e.Detail
		delete(j.rolling, e.Peer)
	case rotator.EventRollCompleted:
		s.kind = control.RollCompleted
		s.key = noKey
		if e.Current.Valid {
			s.send, s.key = e.Current.ID, sendOnly
		}
		delete(j.rolling, e.Peer)
	case rotator.EventState:
		switch {
		case e.From == e.State:
			s.kind, s.key = control.RollSessionUp, noKey
			delete(j.rolling, e.Peer)
		case e.State == rotator.StateAnnounced:
			s.kind = control.RollAnnounced
		case e.State == rotator.StateGrace:
			s.kind = control.RollSwitched
		case e.State == rotator.StateSteady && rolling:
			s.kind, s.key = control.RollReplanned, noKey
			delete(j.rolling, e.Peer)
		default:
			return s, false
		}
	default:
		return s, false
	}
	return s, true
}

// event records a rotator event's step.
func (j *rollJournal) event(e rotator.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.init()
	// A roll to a key an earlier pass installed (accept-only) takes no
	// install step: its first event is the announce. It starts all the
	// same, for aoctl rotate --wait as for every reader of the steps.
	if e.Kind == rotator.EventState && e.State == rotator.StateAnnounced && !j.rolling[e.Peer] {
		if s, ok := j.stepOf(rotator.Event{Peer: e.Peer, Kind: rotator.EventRollStarted, From: e.From, State: e.From,
			At: e.At, HavePending: e.HavePending, Pending: e.Pending}); ok {
			j.addLocked(e.Peer, s)
		}
	}
	if s, ok := j.stepOf(e); ok {
		j.addLocked(e.Peer, s)
	}
}

// down records that id's session went down (reason: the speaker's word
// for why, "" when it says none).
func (j *rollJournal) down(id rotator.PeerID, at time.Time, reason string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.init()
	delete(j.rolling, id)
	j.addLocked(id, journalStep{at: at, kind: control.RollSessionDown, state: rotator.StateDown, reason: reason})
}

// forget drops a peer that is gone.
func (j *rollJournal) forget(id rotator.PeerID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.steps, id)
	delete(j.rolling, id)
}

func (j *rollJournal) init() {
	if j.steps == nil {
		j.steps, j.rolling, j.changed = map[rotator.PeerID][]storedStep{}, map[rotator.PeerID]bool{}, make(chan struct{})
	}
}

func (j *rollJournal) addLocked(id rotator.PeerID, s journalStep) {
	j.seq++
	s.seq = j.seq
	ss := j.steps[id]
	if len(ss) == maxRollSteps {
		ss = append(ss[:0], ss[1:]...)
	}
	j.steps[id] = append(ss, s.store())
	close(j.changed)
	j.changed = make(chan struct{})
}

// last is the sequence number of the last step recorded, any peer's.
func (j *rollJournal) last() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// after is id's steps after seq, and a channel closed at the next step.
func (j *rollJournal) after(id rotator.PeerID, seq uint64) ([]journalStep, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.init()
	var out []journalStep
	for _, s := range j.steps[id] {
		if s.seq > seq {
			out = append(out, s.step())
		}
	}
	return out, j.changed
}

// rollsReport is Daemon.Rolls (control.RollWatcher): the peer's roll steps after
// req.After, waiting up to req.Wait for one, keys named from the key
// source.
func (sv *statusView) rollsReport(ctx context.Context, req control.RollsRequest) (control.RollsReport, error) {
	id, err := sv.rollPeer(req)
	if err != nil {
		return control.RollsReport{}, err
	}
	rep := control.RollsReport{Peer: id.Addr.String(), VRF: id.VRF, Last: req.After}
	var timeout <-chan time.Time
	if req.Wait > 0 {
		timeout = time.After(req.Wait)
	}
	steps, changed := sv.rolls.after(id, req.After)
	for len(steps) == 0 && timeout != nil {
		select {
		case <-changed:
		case <-timeout:
			timeout = nil
		case <-ctx.Done():
			return rep, ctx.Err()
		}
		steps, changed = sv.rolls.after(id, req.After)
	}
	if len(steps) == 0 {
		return rep, nil
	}
	names := sv.rollNames(id)
	for _, s := range steps {
		rs := control.RollStep{Seq: s.seq, At: s.at, Step: s.kind, State: string(s.state), Reason: s.reason, Detail: s.detail}
		switch s.key {
		case bothIDs:
			rs.Key = names.both(s.send, s.recv)
		case sendOnly:
			rs.Key = names.bySend(s.send)
		}
		rep.Steps = append(rep.Steps, rs)
		rep.Last = s.seq
	}
	return rep, nil
}

// rollPeer is the one peer a RollsRequest names: by peer.Key's text, or by
// address in req.VRF (without one: the one VRF that has the address).
func (sv *statusView) rollPeer(req control.RollsRequest) (rotator.PeerID, error) {
	var found []rotator.PeerID
	for _, p := range sv.table.peerList() {
		if p.id.String() == req.Peer || p.info.Neighbor.String() == req.Peer && (req.VRF == "" || req.VRF == p.info.VRF) {
			found = append(found, p.id)
		}
	}
	switch len(found) {
	case 0:
		return peer.Key{}, fmt.Errorf("peer %q has no session aokeyd manages: %w", req.Peer, control.ErrNotFound)
	case 1:
		return found[0], nil
	}
	return peer.Key{}, fmt.Errorf("%w: peer %s is in %d VRFs: name the VRF", control.ErrInvalid, req.Peer, len(found))
}

// rollKeyNames names a peer's keys by their IDs from its chain in the key
// source.
type rollKeyNames struct {
	chain string
	byIDs map[[2]uint8]keyName
}

func (n rollKeyNames) both(send, recv uint8) *control.KeyName {
	k := &control.KeyName{SendID: send, RecvID: recv}
	if m, ok := n.byIDs[[2]uint8{send, recv}]; ok {
		k.Chain, k.Name = m.chain, m.mkt.Name
	}
	return k
}

// bySend names the chain's one key with SendID send; its IDs alone when
// the chain has none or several.
func (n rollKeyNames) bySend(send uint8) *control.KeyName {
	var hit *control.KeyName
	for ids, m := range n.byIDs {
		if ids[0] != send {
			continue
		}
		if hit != nil {
			return &control.KeyName{SendID: send, RecvID: hit.RecvID}
		}
		hit = &control.KeyName{Chain: m.chain, Name: m.mkt.Name, SendID: send, RecvID: ids[1]}
	}
	if hit == nil {
		return &control.KeyName{SendID: send}
	}
	return hit
}

// rollNames is id's key names.
func (sv *statusView) rollNames(id rotator.PeerID) rollKeyNames {
	snap, release := sv.shared()
	defer release()
	if snap == nil {
		return rollKeyNames{}
	}
	info := bgp.PeerInfo{Neighbor: id.Addr, VRF: id.VRF}
	if p := sv.table.peer(id); p != nil {
		info = *p.info // an interface neighbour's keys follow its learned address
	}
	pk, err := sv.recon.desiredOf(sv.policy(), snap, info, time.Now())
	if err != nil {
		return rollKeyNames{}
	}
	return rollKeyNames{chain: pk.SourceChain, byIDs: mktIndex(snap, pk.SourceChain)}
}

// noteRollDown records a session's end in the roll journal, with the
// speaker's reason when it gives one.
func (sv *statusView) noteRollDown(info bgp.PeerInfo) {
	_, why := info.LastDown()
	sv.rolls.down(info.Key(), time.Now(), why)
}
