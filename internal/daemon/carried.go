package daemon

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The carried-keys record (issue 47): what each peer's sessions carry, up
// or down, so that the never-strand rule knows after a restart what it
// knew before. Invariants:
//   - The record is written (durably, then its backup) before a listener
//     sync that reads the carried keys applies anything: whatever a sync
//     kept because a session carried it is in the record before the sync
//     could let anything else go, so a crash at any moment restarts with
//     at least what the last sync relied on.
//   - A peer is its peer.Key (address and VRF); each key is its
//     reference (prefix, L3 device, IDs) and its material's fingerprint,
//     under the fingerprint key the check value names (a record written
//     under another key keeps the references and drops the fingerprints).
//   - It lives in the shared record layer (durable.Record): a backup
//     restores a lost or unreadable record; both lost is a first start,
//     where the start-up gate (sessionsRead) keeps every listener key
//     until each session up has been read from the kernel (only what
//     peers that are down last carried is lost with both files); one
//     that exists but cannot be read refuses the start.
//   - Key material never enters it: a fingerprint is a keyed digest.
type carriedRecord struct {
	path  string // "": memory only
	fault durable.Fault
	log   *slog.Logger
	// saved is what the files hold (each peer's keys sorted, with the
	// fingerprints recorded): a save of the same writes nothing, and a
	// key a bare read gives without its fingerprint keeps the one here.
	saved map[rotator.PeerID][]rotator.CarriedKey
}

// carriedFile is the record's on-disk form.
type carriedFile struct {
	Version int           `json:"version"`
	Check   string        `json:"check"`
	Peers   []carriedPeer `json:"peers"`
}

type carriedPeer struct {
	Peer rotator.PeerID `json:"peer"`
	Keys []carriedRow   `json:"keys"`
}

type carriedRow struct {
	Prefix      netip.Prefix `json:"prefix"`
	IfIndex     int          `json:"ifindex,omitempty"`
	SendID      uint8        `json:"send_id"`
	RecvID      uint8        `json:"recv_id"`
	Fingerprint string       `json:"fingerprint,omitempty"`
}

// maxCarriedBytes caps the record: about 120 bytes a key, so room for
// well over 100,000 carried keys.
const maxCarriedBytes = 16 << 20

// carriedFileRecord is the record at path in the shared record layer
// (durable.Record: a regular file only, capped, with a backup).
func carriedFileRecord(path string, fault durable.Fault) durable.Record {
	return durable.Record{Path: path, Max: maxCarriedBytes, Fault: fault, Check: func(b []byte) error {
		_, err := decodeCarried(b)
		return err
	}}
}

// openCarried loads the record at path (or its backup) and returns what
// it holds. Neither copy existing is a first start, or both were lost:
// logged, and the start-up gate alone holds the listeners. A record that
// exists but cannot be read refuses the start (the layer's rule: the
// record is not invented), naming both files.
func openCarried(path string, fault durable.Fault, log *slog.Logger) (*carriedRecord, map[rotator.PeerID][]rotator.CarriedKey, error) {
	r := &carriedRecord{path: path, fault: fault, log: log}
	if path == "" {
		return r, nil, nil
	}
	l, err := carriedFileRecord(path, fault).Load()
	if err != nil {
		return nil, nil, fmt.Errorf("carried-keys record %w (move both aside to start afresh: every listener key then stays "+
			"until each session up has been read, and what peers that are down last carried is not known)", err)
	}
	switch l.From {
	case durable.None:
		log.Warn("no carried-keys record (a first start, or it was lost): every listener key stays until each session up has been read; "+
			"what peers that are down last carried is not known", "file", path)
		return r, nil, nil
	case durable.Backup:
		log.Error("CARRIED-KEYS RECORD lost or unreadable: using its backup, which every write keeps; check the disk", "file", path, "backup", path+".bak")
	}
	m, err := decodeCarried(l.Data) // Load checked it
	if err != nil {
		return nil, nil, fmt.Errorf("carried-keys record %s: %w", path, err)
	}
	r.saved = normCarried(m, nil)
	return r, m, nil
}

func decodeCarried(b []byte) (map[rotator.PeerID][]rotator.CarriedKey, error) {
	var f carriedFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a carried-keys record: %w", err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("carried-keys record version %d, want 1", f.Version)
	}
	sameKey := f.Check == checkValue()
	out := make(map[rotator.PeerID][]rotator.CarriedKey, len(f.Peers))
	for _, p := range f.Peers {
		if !p.Peer.IsValid() {
			return nil, errors.New("carried-keys record: an entry without a peer")
		}
		for _, row := range p.Keys {
			if !row.Prefix.IsValid() {
				return nil, fmt.Errorf("carried-keys record: peer %s: a key without a prefix", p.Peer)
			}
			k := rotator.CarriedKey{Ref: tcpao.KeyRef{Peer: row.Prefix, IfIndex: row.IfIndex, SendID: row.SendID, RecvID: row.RecvID}}
			if fp, err := hex.DecodeString(row.Fingerprint); sameKey && err == nil && len(fp) == len(k.FP) {
				copy(k.FP[:], fp)
			}
			out[p.Peer] = append(out[p.Peer], k)
		}
	}
	return out, nil
}

// normCarried is byPeer with each peer's keys sorted and without
// duplicates, a key without its fingerprint given the one prev records.
func normCarried(byPeer, prev map[rotator.PeerID][]rotator.CarriedKey) map[rotator.PeerID][]rotator.CarriedKey {
	out := make(map[rotator.PeerID][]rotator.CarriedKey, len(byPeer))
	for id, ks := range byPeer {
		ks = slices.Clone(ks)
		for i := range ks {
			if ks[i].FP == (tcpao.Fingerprint{}) {
				if j := slices.IndexFunc(prev[id], func(k rotator.CarriedKey) bool { return k.Ref == ks[i].Ref }); j >= 0 {
					ks[i].FP = prev[id][j].FP
				}
			}
		}
		slices.SortFunc(ks, func(a, b rotator.CarriedKey) int { return compareRefs(a.Ref, b.Ref) })
		out[id] = slices.CompactFunc(ks, func(a, b rotator.CarriedKey) bool { return a.Ref == b.Ref })
	}
	return out
}

// save records byPeer (normCarried) when it differs from what the files
// hold: the record, then its backup, each durably. An unchanged record
// costs a comparison, not an encoding: a full pass calls it.
func (r *carriedRecord) save(byPeer map[rotator.PeerID][]rotator.CarriedKey) error {
	norm := normCarried(byPeer, r.saved)
	if r.saved != nil && maps.EqualFunc(norm, r.saved, slices.Equal) {
		return nil
	}
	if r.path == "" {
		r.saved = norm
		return nil
	}
	ids := slices.SortedFunc(maps.Keys(norm), rotator.PeerID.Compare)
	f := carriedFile{Version: 1, Check: checkValue(), Peers: make([]carriedPeer, 0, len(ids))}
	for _, id := range ids {
		p := carriedPeer{Peer: id, Keys: make([]carriedRow, len(norm[id]))}
		for i, k := range norm[id] {
			p.Keys[i] = carriedRow{Prefix: k.Ref.Peer, IfIndex: k.Ref.IfIndex, SendID: k.Ref.SendID, RecvID: k.Ref.RecvID}
			if k.FP != (tcpao.Fingerprint{}) {
				p.Keys[i].Fingerprint = hex.EncodeToString(k.FP[:])
			}
		}
		f.Peers = append(f.Peers, p)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := carriedFileRecord(r.path, r.fault).Save(append(b, '\n')); err != nil {
		if !durable.Replaced(err) {
			return fmt.Errorf("carried-keys record: %w", err)
		}
		// The record holds b; its backup or its directory entry lags.
		r.log.Warn("the carried-keys record is written, but its backup or directory is behind; check the disk", "err", err)
	}
	r.saved = norm
	return nil
}

// compareRefs orders key references by prefix, device and IDs.
func compareRefs(a, b tcpao.KeyRef) int {
	if c := a.Peer.Addr().Compare(b.Peer.Addr()); c != 0 {
		return c
	}
	if c := a.Peer.Bits() - b.Peer.Bits(); c != 0 {
		return c
	}
	if c := a.IfIndex - b.IfIndex; c != 0 {
		return c
	}
	if c := int(a.SendID) - int(b.SendID); c != 0 {
		return c
	}
	return int(a.RecvID) - int(b.RecvID)
}

// holdAll are key ranges covering every listener key (Desired.Frozen): a
// listener sync under them deletes nothing but revoked keys.
var holdAll = []rotator.KeyRange{
	{Prefix: netip.MustParsePrefix("0.0.0.0/0"), AnyDevice: true},
	{Prefix: netip.MustParsePrefix("::/0"), AnyDevice: true},
}

// carriedNow is what a listener sync keeps for the sessions: the keys each
// peer's sessions carry, recorded durably first, and whether the sync must
// delete nothing (hold): the sessions up were not all read since the
// start, or the record could not be written. Restored peers that left
// the policy are forgotten (an operator's removal). Reconcile goroutine.
func (rc *reconciler) carriedNow() (carried []tcpao.KeyRef, hold bool) {
	// Whether every session was read is asked first: a session taken
	// over between the two questions is then in what is recorded.
	hold = !rc.sessionsRead()
	byPeer := rc.ctrl.CarriedByPeer()
	for id := range byPeer {
		if _, err := rc.policy().BindingForKey(id); err != nil {
			delete(byPeer, id)
			if rc.table.peer(id) == nil {
				rc.ctrl.Forget(id)
			}
		}
	}
	if err := rc.carried.save(byPeer); err != nil {
		rc.log.Error("the keys the sessions carry could not be recorded: no listener key is deleted until they are", "err", err)
		hold = true
	}
	return rotator.CarriedRefs(byPeer), hold
}

// sessionsRead reports whether, since the start, the speaker's sessions
// have been listed and every session up that a machine runs on has been
// read from the kernel: what they carry is then known from the kernel,
// whatever the record said. It latches. Reconcile goroutine.
func (rc *reconciler) sessionsRead() bool {
	if rc.allRead {
		return true
	}
	if !rc.trackerSynced.Load() {
		rc.log.Info("holding listener deletes: the speaker's sessions are not listed yet since the start")
		rc.noteGate(false, false, 0)
		return false
	}
	var unread []string
	for _, p := range rc.table.peerList() {
		if p.handle != nil && rc.ctrl.Runs(p.id, p.handle) && !rc.ctrl.Read(p.id) {
			unread = append(unread, p.id.String())
		}
	}
	if len(unread) > 0 {
		rc.log.Info("holding listener deletes until every session's keys are read since the start", "unread", len(unread), "first", unread[0])
		rc.noteGate(false, true, len(unread))
		return false
	}
	rc.allRead = true
	rc.noteGate(true, true, 0)
	return true
}

// carriedUp are the keys the sessions that are up carry, and whether that
// is all of them: every session the speaker reported up runs a machine
// that has read it. Reconcile goroutine.
func (rc *reconciler) carriedUp() (up []tcpao.KeyRef, complete bool) {
	up, complete = rc.ctrl.CarriedUp()
	for _, p := range rc.table.peerList() {
		if p.handle != nil && !rc.ctrl.Runs(p.id, p.handle) {
			complete = false
		}
	}
	return up, complete
}
