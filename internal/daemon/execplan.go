package daemon

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// execPlanner plans the key lists of the peers an Executor keys: each
// peer's written list, as
// Observe reports it, is planned as a socket by rotator.PlanSocket, and a
// key the peer sent with leaves it only by rotator.RetireProof on the
// session's counts (the one retire rule, roll.pml's executor end) or a
// revoke. It keeps each peer's previous session read, the proof's base.
// Safe for concurrent use: the
// pass plans, a revoke's request plans its covered peers.
type execPlanner struct {
	mu   sync.Mutex
	last map[peer.Key]execRead // each session's read at the last plan
}

func newExecPlanner() *execPlanner { return &execPlanner{last: map[peer.Key]execRead{}} }

// execWant is one executor peer's desired state: the policy's keys with
// revocations applied, the key to send with (-1: none may be sent with
// now; an early roll's key when aoctl rotate named one) and the written
// keys that leave whatever (revoked, or expired with on_key_expiry:
// remove).
type execWant struct {
	Keys      []policy.ScheduledKey
	Preferred int
	Revoked   []tcpao.KeyRef
	Names     map[execID]string // "chain/key" of the peer's chain's keys
}

// execRead is one read of an executor peer's session, kept as the next
// read's base.
type execRead struct {
	good map[execID]uint64 // each key's pkt_good
	at   time.Time
	// rnext is the session's RNext_key (hasRNext: it has one), and since
	// when the reads in a row ending with this one found it so.
	rnext    execID
	hasRNext bool
	since    time.Time
}

// execSettle is how long after the first read that found the preferred
// key RNext_key a later read is a base the retire proof may count from:
// two network delays (the machine's graceSent; exec.pml's two reads in a
// row).
const execSettle = 2 * time.Second

// execID is a key's SendID and RecvID: an executor's keys carry no peer
// prefix of their own (the speaker's protocol has one neighbor).
type execID [2]uint8

// execAnyPeer is the peer prefix of every executor key as the planner
// sees it: the speaker's protocol has one neighbor, its keys no prefix.
var execAnyPeer = netip.PrefixFrom(netip.IPv4Unspecified(), 0)

func execRef(id execID) tcpao.KeyRef { return ExecRef(id[0], id[1]) }

// ExecRef is the reference of an executor's key with these IDs, as the
// pass's plans, ExecPlan.List and Clean name it: an executor's Observe
// names its written keys so.
func ExecRef(sendID, recvID uint8) tcpao.KeyRef {
	return tcpao.KeyRef{Peer: execAnyPeer, SendID: sendID, RecvID: recvID}
}

func execIDOf(r tcpao.KeyRef) execID { return execID{r.SendID, r.RecvID} }

func schedExecID(k policy.ScheduledKey) execID { return execID{k.MKT.SendID, k.MKT.RecvID} }

// plan is peer id's plan for want on ob at now (gen: the pass's), and
// whether there is one to submit: an invalid desired state (a key the
// planner refuses) submits nothing, the list stays as written. The
// session's read becomes the next plan's base (record; aoctl plan's dry
// run records nothing); none (no session) forgets the base, an unread one
// keeps it.
func (p *execPlanner) plan(id peer.Key, want execWant, ob ExecObserved, now time.Time, gen uint64, record bool) (ExecPlan, bool) {
	p.mu.Lock()
	last, have := p.last[id]
	p.mu.Unlock()
	in := execSocketOf(want, ob, last, have, now)
	p.mu.Lock()
	switch {
	case !record, ob.Unread != nil:
	case ob.Session == nil:
		delete(p.last, id)
	default:
		p.last[id] = in.read
	}
	p.mu.Unlock()
	sp := rotator.PlanSocket(in.d, in.o)
	if in.session {
		// The peer was seen sending with a desired key. The retire proof:
		// it sent with the preferred key since a settled read, and no old
		// key verified a segment since.
		if rp := rotator.RetireProof(sp, in.prev, in.o); rp.Proven(in.sawNew) && len(rp.Retire) > 0 {
			in.d.Retire = rp.Retire
			sp = rotator.PlanSocket(in.d, in.o)
		}
	}
	if slices.ContainsFunc(sp.Blocked, func(h rotator.Held) bool { return h.Why == rotator.ReasonInvalid }) {
		return ExecPlan{}, false
	}
	return ExecPlan{Peer: id, Plan: sp, Keys: want.Keys, Preferred: want.Preferred, Revoked: in.revoked, Gen: gen}, true
}

// execSocket is one executor peer's written list as the planner's socket.
type execSocket struct {
	d rotator.Desired
	o rotator.Observed
	// session: planned as the speaker's established session (each key's
	// pkt_good and Current_key from it); else as a listener that every
	// written key carries, so that none but a revoked one goes.
	session bool
	prev    rotator.GoodCounts // the session's counts at the base read
	// sawNew: the peer sent with the preferred key since the base read,
	// which was settled.
	sawNew  bool
	revoked []tcpao.KeyRef // written keys that leave whatever
	read    execRead       // this read, the next one's base
}

// execSocketOf is the written list as a socket: its keys the written ones,
// its RNext_key the key this plan prefers (the speaker asks the peer for
// it), else the written preferred one; Current_key and each key's pkt_good
// the session's. Without a session read, or before the peer was seen
// sending with a desired key, which key it sends with is unknown: the list
// is then a listener whose every key carries a session. With no base read
// (a start, or a session re-established between two reads: a count
// fell) no key the peer sent with leaves before a second read shows its
// count stopped.
func execSocketOf(want execWant, ob ExecObserved, last execRead, have bool, now time.Time) execSocket {
	es := execSocket{d: rotator.Desired{Socket: rotator.SocketID("exec list"), Kind: rotator.Established}, o: rotator.Observed{HaveAO: true}}
	desired := func(id execID) int {
		return slices.IndexFunc(want.Keys, func(k policy.ScheduledKey) bool { return schedExecID(k) == id })
	}
	writtenPref := slices.IndexFunc(ob.Written.Keys, func(k tcpao.KeyInfo) bool { return k.IsRNext })
	pref := want.Preferred
	if pref < 0 && writtenPref >= 0 {
		// No key may be sent with now: the speaker keeps sending with the
		// key written preferred.
		pref = desired(execIDOf(ob.Written.Keys[writtenPref].KeyRef))
	}
	// The session's read, against the base.
	var cur execID
	haveSessCur := false
	es.read = execRead{good: map[execID]uint64{}, at: now, since: now}
	if ob.Session != nil {
		for _, k := range ob.Session.Keys {
			id := execIDOf(k.KeyRef)
			es.read.good[id] = k.PktGood
			if n, ok := last.good[id]; ok && n > k.PktGood {
				have = false // another socket's counts
			}
			if k.IsCurrent {
				cur, haveSessCur = id, true
			}
			if k.IsRNext {
				es.read.rnext, es.read.hasRNext = id, true
			}
		}
		if have && es.read.hasRNext && last.hasRNext && last.rnext == es.read.rnext {
			es.read.since = last.since
		}
	}
	seen := false
	for i, k := range want.Keys {
		id := schedExecID(k)
		es.d.Keys = append(es.d.Keys, rotator.DesiredKey{
			Key:        tcpao.Key{KeyRef: execRef(id), Algorithm: k.MKT.Algorithm, Secret: k.MKT.Secret},
			AcceptOnly: !k.Sendable && i != pref})
		seen = seen || ob.Session != nil && es.read.good[id] > 0
	}
	rnext, haveRNext := execID{}, false
	switch {
	case pref >= 0:
		rnext, haveRNext = schedExecID(want.Keys[pref]), true
		es.d.WantCurrent, es.d.WantRNext = rotator.ID(rnext[0]), rotator.ID(rnext[1])
	case writtenPref >= 0:
		rnext, haveRNext = execIDOf(ob.Written.Keys[writtenPref].KeyRef), true
	}
	es.session = ob.Unread == nil && ob.Session != nil && seen
	if es.session {
		if have {
			es.prev = rotator.GoodCounts{}
			for id, n := range last.good {
				es.prev[execRef(id)] = n
			}
		}
		settled := have && last.hasRNext && last.rnext == rnext && last.at.Sub(last.since) >= execSettle
		es.sawNew = haveRNext && settled && es.read.good[rnext] > last.good[rnext]
	} else {
		es.d.Kind = rotator.Listening
	}
	for _, w := range ob.Written.Keys {
		id := execIDOf(w.KeyRef)
		ki := tcpao.KeyInfo{KeyRef: execRef(id), Algorithm: w.Algorithm, Fingerprint: w.Fingerprint, IsRNext: haveRNext && id == rnext}
		if es.session {
			ki.PktGood = es.read.good[id]
			ki.IsCurrent = haveSessCur && id == cur
		} else {
			es.o.Carried = append(es.o.Carried, ki.KeyRef)
		}
		if slices.ContainsFunc(want.Revoked, func(r tcpao.KeyRef) bool { return execIDOf(r) == id }) && desired(id) < 0 {
			es.revoked = append(es.revoked, ki.KeyRef)
			es.d.Revoked = append(es.d.Revoked, rotator.RevokedKey{KeyRef: ki.KeyRef, Fingerprint: ki.Fingerprint})
		}
		es.o.Keys = append(es.o.Keys, ki)
	}
	return es
}
