package early

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Request is one peer's aoctl rotate as the early-roll record keeps it
// across restarts (the daemon keeps the record in its state directory,
// through internal/durable): the peer, the target as the key source had
// it when the operator asked, when they asked, whether the roll to the
// target completed (Held: the peer sends with it ahead of its send
// start), and the session the roll runs on.
type Request struct {
	Peer  peer.Key
	Key   Key
	Asked time.Time
	Held  bool
	// Session is the connection that was up when the operator asked
	// (zero: not known). A roll that has not completed ends when that
	// session goes down, also while aokeyd was stopped: a later session
	// is another connection.
	Session Session
}

// Session names one connection of a peer's: its socket's inode and its
// two ends. A new connection has another inode (and, but for a
// coincidence, another port at one end).
type Session struct {
	Inode         uint64
	Local, Remote netip.AddrPort
}

// IsZero reports whether s names no connection.
func (s Session) IsZero() bool { return s == Session{} }

// The record's format. Invariants:
//   - A peer is peer.Key's String form (Parse reads it back), one row per
//     peer; Encode writes the rows in peer.Key order.
//   - The material is the key's algorithm, MAC length, tcp_options and
//     fingerprint: a keyed digest under the daemon's fingerprint key,
//     which Check names (a digest of a fixed text under that key), never
//     the secret. A record read under another key cannot be matched to
//     the key source's keys: the caller compares Check.
//   - Decode takes what Encode writes and refuses everything else with an
//     error (an unknown version, a row that lacks a field, a duplicate
//     peer): the caller treats the record as unreadable.
type recordFile struct {
	Version int         `json:"version"`
	Check   string      `json:"check"`
	Rolls   []recordRow `json:"rolls"`
}

type recordRow struct {
	Peer        string    `json:"peer"`
	Chain       string    `json:"chain"`
	Key         string    `json:"key"`
	SendID      uint8     `json:"send_id"`
	RecvID      uint8     `json:"recv_id"`
	Algorithm   string    `json:"algorithm"`
	MACLen      uint8     `json:"mac_len"`
	TCPOptions  string    `json:"tcp_options"` // include or exclude
	Fingerprint string    `json:"fingerprint"`
	SendStart   time.Time `json:"send_start,omitzero"`
	Asked       time.Time `json:"asked"`
	State       string    `json:"state"` // rolling or held
	// Session is Request.Session (omitted when not known).
	Session *recordSession `json:"session,omitempty"`
}

type recordSession struct {
	Inode  uint64         `json:"inode"`
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
}

const (
	recordVersion = 1
	stateRolling  = "rolling"
	stateHeld     = "held"
)

// Encode is the record of reqs, whose fingerprints were computed under
// the key check names. It refuses a request without a peer, and two
// requests for one peer.
func Encode(reqs []Request, check string) ([]byte, error) {
	reqs = slices.Clone(reqs)
	slices.SortFunc(reqs, func(a, b Request) int { return a.Peer.Compare(b.Peer) })
	f := recordFile{Version: recordVersion, Check: check, Rolls: make([]recordRow, 0, len(reqs))}
	for i, r := range reqs {
		if !r.Peer.IsValid() {
			return nil, errors.New("early-roll record: a request without a peer")
		}
		if i > 0 && reqs[i-1].Peer == r.Peer {
			return nil, fmt.Errorf("early-roll record: two requests for peer %s", r.Peer)
		}
		k := r.Key
		row := recordRow{Peer: r.Peer.String(), Chain: k.Chain, Key: k.Name, SendID: k.SendID, RecvID: k.RecvID,
			Algorithm: string(k.Material.Alg), MACLen: k.Material.MACLen, TCPOptions: "exclude",
			Fingerprint: hex.EncodeToString(k.Material.Fingerprint[:]), SendStart: k.Start, Asked: r.Asked, State: stateRolling}
		if k.Material.Include {
			row.TCPOptions = "include"
		}
		if r.Held {
			row.State = stateHeld
		}
		if s := r.Session; !s.IsZero() {
			if s.Inode == 0 || !s.Local.IsValid() || !s.Remote.IsValid() {
				return nil, fmt.Errorf("early-roll record: peer %s: a session without its inode or ends", r.Peer)
			}
			row.Session = &recordSession{Inode: s.Inode, Local: s.Local, Remote: s.Remote}
		}
		f.Rolls = append(f.Rolls, row)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("early-roll record: %w", err)
	}
	return append(b, '\n'), nil
}

// Decode reads Encode's form: the requests in peer.Key order and the
// check value their fingerprints were computed under. Anything else is an
// error naming what is wrong.
func Decode(b []byte) (reqs []Request, check string, err error) {
	var f recordFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, "", fmt.Errorf("not an early-roll record: %w", err)
	}
	if f.Version != recordVersion {
		return nil, "", fmt.Errorf("early-roll record version %d, want %d", f.Version, recordVersion)
	}
	if c, err := hex.DecodeString(f.Check); err != nil || len(c) != len(tcpao.Fingerprint{}) {
		return nil, "", errors.New("early-roll record: no check value")
	}
	reqs = make([]Request, 0, len(f.Rolls))
	for i, row := range f.Rolls {
		r, err := row.request()
		if err != nil {
			return nil, "", fmt.Errorf("early-roll record: roll %d: %w", i+1, err)
		}
		reqs = append(reqs, r)
	}
	slices.SortFunc(reqs, func(a, b Request) int { return a.Peer.Compare(b.Peer) })
	for i := 1; i < len(reqs); i++ {
		if reqs[i-1].Peer == reqs[i].Peer {
			return nil, "", fmt.Errorf("early-roll record: two rolls for peer %s", reqs[i].Peer)
		}
	}
	return reqs, f.Check, nil
}

func (row recordRow) request() (Request, error) {
	p, err := peer.Parse(row.Peer)
	if err != nil {
		return Request{}, err
	}
	r := Request{Peer: p, Asked: row.Asked, Key: Key{Chain: row.Chain, Name: row.Key, SendID: row.SendID, RecvID: row.RecvID,
		Material: Material{Alg: tcpao.Algorithm(row.Algorithm), MACLen: row.MACLen}, Start: row.SendStart}}
	switch {
	case row.Chain == "" || row.Key == "":
		return Request{}, errors.New("no chain or key name")
	case !r.Key.Material.Alg.Valid():
		return Request{}, errors.New("no known algorithm")
	}
	switch row.TCPOptions {
	case "include":
		r.Key.Material.Include = true
	case "exclude":
	default:
		return Request{}, errors.New(`tcp_options is neither "include" nor "exclude"`)
	}
	fp, err := hex.DecodeString(row.Fingerprint)
	if err != nil || len(fp) != len(r.Key.Material.Fingerprint) {
		return Request{}, errors.New("no fingerprint")
	}
	copy(r.Key.Material.Fingerprint[:], fp)
	switch row.State {
	case stateHeld:
		r.Held = true
	case stateRolling:
	default:
		return Request{}, errors.New(`state is neither "rolling" nor "held"`)
	}
	if s := row.Session; s != nil {
		if s.Inode == 0 || !s.Local.IsValid() || !s.Remote.IsValid() {
			return Request{}, errors.New("a session without its inode or ends")
		}
		r.Session = Session{Inode: s.Inode, Local: s.Local, Remote: s.Remote}
	}
	return r, nil
}
