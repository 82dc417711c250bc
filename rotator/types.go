package rotator

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"

	"github.com/aokeyd/aokeyd/tcpao"
)

// SocketID names one socket in plans and status ("listen 0.0.0.0:179",
// "peer 192.0.2.1"). The caller chooses it; the planner only copies it.
type SocketID string

// Kind is the TCP state class of a socket, which decides what the kernel
// allows on it.
type Kind uint8

const (
	// Established is a connected socket: it has Current_key and RNext_key,
	// deletes are synchronous, and the current/rnext key cannot be deleted
	// without naming a replacement.
	Established Kind = iota
	// Listening is a listen socket: no current/rnext, deletes are del_async
	// (synchronous with ListenerOptions.SyncDeletes).
	Listening
)

func (k Kind) String() string {
	switch k {
	case Established:
		return "established"
	case Listening:
		return "listening"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// OptID is an optional KeyID.
type OptID struct {
	ID    uint8
	Valid bool
}

// ID returns a set OptID.
func ID(id uint8) OptID { return OptID{ID: id, Valid: true} }

func (o OptID) String() string {
	if !o.Valid {
		return "-"
	}
	return strconv.Itoa(int(o.ID))
}

// LogValue logs an OptID as its key ID ("-" when not set), as String
// shows it, so that no log handler marshals the struct (slog's JSON
// handler would run encoding/json on it for every line that names a key).
func (o OptID) LogValue() slog.Value {
	if !o.Valid {
		return slog.StringValue("-")
	}
	return slog.IntValue(int(o.ID))
}

// DesiredKey is one MKT a socket should carry.
type DesiredKey struct {
	tcpao.Key
	// AcceptOnly marks a key that is installed for receiving but must not
	// be used for sending (its send lifetime is over or not begun). The
	// planner corrects Current_key away from such a key.
	AcceptOnly bool
}

// Desired is the consumer-declared input of the planner: the keys one socket
// should carry and which ones it should use. The daemon glue builds it from
// policy output.
type Desired struct {
	Socket SocketID
	Kind   Kind
	Keys   []DesiredKey
	// WantCurrent is the preferred Current_key (a SendID) and WantRNext the
	// RNext_key to announce (a RecvID). Both are ignored on listeners. The
	// planner sets RNext to WantRNext; it sets Current_key only when the
	// present one is not a desired sendable key (the peer's RNext moving
	// Current_key to another valid key is the protocol working).
	WantCurrent OptID
	WantRNext   OptID
	// AORequired is the socket's ao_required flag.
	AORequired bool
	// Revoked lists keys that must go even if they are in use: with
	// Replace, the only keys a forced delete may remove from an
	// established socket while they are Current_key, and with Retire the
	// only keys in use (see PlanSocket's never-strand rule) that may go at
	// all. A revoked key is its reference and its material: an installed
	// key under the reference with other material is another key (an
	// operator's own, material edited in place), not revoked.
	Revoked []RevokedKey
	// Retire lists keys of an established socket that the roll proved the
	// peer has stopped sending with (the retire step: the new key's
	// pkt_good rose after the grace period and theirs did not): in use by
	// the never-strand rule only through their pkt_good, they may go.
	Retire []tcpao.KeyRef
	// Replace lists keys whose new material, under the IDs of an installed
	// key, an operator approved (aoctl replace): the installed key may be
	// deleted and the new one added in its place. Without it, new material
	// under installed IDs is held back on every socket (ReasonEdited).
	Replace []tcpao.KeyRef
	// Frozen are ranges of installed keys that must stay whatever else
	// the desired state says (a binding whose keys cannot be computed, or
	// whose chain is degraded in the key source): a key they cover that is
	// neither desired under its reference nor revoked is never deleted.
	// The planner still sees such keys (the optmem check counts them).
	Frozen []KeyRange
	// Owner, when set, says which installed keys are aokeyd's: a key it
	// does not own (another agent installed it: an operator's setsockopt,
	// a speaker keying its own sockets) that is not a desired key is
	// foreign. A foreign key is never deleted or replaced, whatever
	// Revoked or Replace name (ReasonForeign: kept), and a desired key
	// whose IDs clash with one is not added (ReasonForeign: blocked). Nil:
	// every installed key is aokeyd's. Compared by identity (Same).
	Owner Ownership
}

// RevokedKey is one Desired.Revoked entry: the key's reference and the
// fingerprint of its material (tcpao.Secret.Fingerprint).
type RevokedKey struct {
	tcpao.KeyRef
	Fingerprint tcpao.Fingerprint
}

// Ownership tells aokeyd's installed keys from foreign ones (Desired.Owner).
// Owns is called on full reads only (a key with its fingerprint), from the
// planner: it must not block.
type Ownership interface {
	Owns(k tcpao.KeyInfo) bool
}

// Claimer is an Ownership that takes a desired key found in place as
// aokeyd's: the planner calls Claim (on full reads, without blocking) for
// each installed key whose reference and material are a desired key's; a
// key already aokeyd's stays as it is recorded. Such a key is exactly what aokeyd would have
// installed there; most often aokeyd did, and a crash lost the record of
// it before it was written. Unclaimed it would be foreign once no longer
// desired, and kept on the socket for good.
type Claimer interface {
	Ownership
	Claim(k tcpao.KeyInfo)
}

// KeyRange covers the keys of one binding on a listener: a peer prefix
// and the prefixes inside it, on one L3 device (IfIndex, or any device
// with AnyDevice).
type KeyRange struct {
	Prefix    netip.Prefix
	IfIndex   int
	AnyDevice bool
}

// Covers reports whether r is one of the range's keys.
func (k KeyRange) Covers(r tcpao.KeyRef) bool {
	return (k.AnyDevice || k.IfIndex == r.IfIndex) && r.Peer.Addr().Is4() == k.Prefix.Addr().Is4() &&
		r.Peer.Bits() >= k.Prefix.Bits() && k.Prefix.Contains(r.Peer.Addr())
}

// Observed is what the kernel reports for one socket.
type Observed struct {
	// HaveAO is false when TCP_AO_INFO answered ENOENT (no TCP-AO yet).
	HaveAO bool
	Info   tcpao.Info
	Keys   []tcpao.KeyInfo
	// Bare: read without the keys' fingerprints (ReadBare), so a key
	// whose secret changed cannot be told from the one desired. PlanSocket
	// plans nothing from it (Blocked).
	Bare bool
	// Carried, for a listening socket, are the keys the established
	// sessions accepted from it carry, as last read from their sockets
	// (CarriedKeys), and those a session that went down carried last: the
	// keys its peer sends with or last authenticated with. A listener key
	// that one of them names (same IDs and L3 device, overlapping peer
	// prefix) is in use by the never-strand rule.
	Carried []tcpao.KeyRef
	// Down, for a listening socket, are bases of its keys that no session
	// up carries: each with its material and counters when that was first
	// seen (DownWatch, which hands over those that verified bad segments
	// since). An edit in place of one that verified bad segments and no
	// good one since takes effect (EditPeerDown). Nil: none (or the rule
	// is off: the sessions up were not all read).
	Down []DownKey
	// Settled, for an established socket, says that its Current_key is
	// the peer's choice: since aokeyd's machine last wrote Current_key or
	// RNext_key on it, or started, it read the socket twice and then a
	// segment of the peer's was verified (the socket's pkt_good rose).
	// The first read lets the segments in flight at that write land (the
	// network's delay is shorter than a poll), so that segment was sent
	// after the peer saw our RNext, and Current_key follows the peer's
	// RNext. Until then an edit in place of a key that authenticated
	// nothing is held back (EditUnsettled).
	Settled bool
}

// OpKind is the kind of one planned operation.
type OpKind uint8

// Operation kinds.
const (
	OpAdd     OpKind = iota + 1 // TCP_AO_ADD_KEY
	OpDel                       // TCP_AO_DEL_KEY
	OpSetInfo                   // setsockopt(TCP_AO_INFO)
)

func (k OpKind) String() string {
	switch k {
	case OpAdd:
		return "add"
	case OpDel:
		return "del"
	case OpSetInfo:
		return "set"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Reason says why the planner emitted an operation or deferred a key.
type Reason uint8

// Reasons.
const (
	ReasonNew          Reason = iota + 1 // desired key missing
	ReasonReplace                        // same IDs, different material: delete-then-add
	ReasonRevoked                        // key listed in Desired.Revoked
	ReasonStale                          // key no longer desired
	ReasonRNext                          // RNext differs from WantRNext
	ReasonCurrent                        // Current_key absent or not a desired sendable key
	ReasonRequired                       // ao_required differs
	ReasonInUse                          // stale key is Current_key: waits for the roll
	ReasonNoReplace                      // in-use key cannot be replaced: no other usable key
	ReasonInvalid                        // desired state is invalid
	ReasonCarried                        // key no longer desired carries a session: kept
	ReasonEdited                         // new material under an installed key's IDs: held back
	ReasonForeign                        // a key aokeyd did not install (Desired.Owner): kept
	ReasonForeignClash                   // a desired key's IDs are a foreign key's: not added, the roll waits
	ReasonMigrated                       // a TCP-MD5 key whose peer's session now runs TCP-AO: removed
	ReasonAOCovers                       // a TCP-MD5 key not added: TCP-AO keys cover the peer
)

var reasonNames = [...]string{
	ReasonNew:          "new",
	ReasonReplace:      "replace",
	ReasonRevoked:      "revoked",
	ReasonStale:        "stale",
	ReasonRNext:        "rnext",
	ReasonCurrent:      "current",
	ReasonRequired:     "ao-required",
	ReasonInUse:        "in-use",
	ReasonNoReplace:    "no-replacement",
	ReasonInvalid:      "invalid",
	ReasonCarried:      "carried",
	ReasonEdited:       "edited-in-place",
	ReasonForeign:      "foreign",
	ReasonForeignClash: "foreign-clash",
	ReasonMigrated:     "migrated",
	ReasonAOCovers:     "ao-covers",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Op is one planned kernel operation on a socket.
type Op struct {
	Kind OpKind
	Why  Reason
	// Key and Add are the OpAdd arguments.
	Key tcpao.Key
	Add tcpao.AddOptions
	// Del is the OpDel argument.
	Del tcpao.DelKey
	// Current, RNext and AORequired (when SetRequired) are the OpSetInfo
	// changes.
	Current     OptID
	RNext       OptID
	SetRequired bool
	AORequired  bool
}

// Ref is the key the op is about (zero for OpSetInfo).
func (o Op) Ref() tcpao.KeyRef {
	switch o.Kind {
	case OpAdd:
		return o.Key.KeyRef
	case OpDel:
		return o.Del.KeyRef
	}
	return tcpao.KeyRef{}
}

// Held is a key the planner left in place, or a change it could not make,
// and why.
type Held struct {
	Ref    tcpao.KeyRef
	Why    Reason
	Detail string
}

// SocketPlan is the ordered plan for one socket.
type SocketPlan struct {
	Socket SocketID
	Kind   Kind
	Ops    []Op
	// Deferred are stale keys left in place because deleting them now would
	// strand the session (they are Current_key); a later plan removes them
	// once the roll moved Current_key away.
	Deferred []Held
	// Blocked are changes the planner refuses; the socket keeps working
	// with its present keys.
	Blocked []Held
	// Kept are what the never-strand rule held back while the rest of the
	// plan goes ahead: keys no longer desired that carry a session
	// (ReasonCarried: kept until an operator action removes them), and
	// desired keys whose new material would replace an installed key under
	// the same IDs (ReasonEdited: the installed key stays, the new
	// material is not applied on that socket).
	Kept []Held
	// Edits are the edits in place the plan decided, applied or held
	// back, each with its rule (edit.go).
	Edits []Edit
}

// Empty reports whether the plan has no operations.
func (p SocketPlan) Empty() bool { return len(p.Ops) == 0 }

// Plan is a plan for many sockets, in input order.
type Plan []SocketPlan

// Input is one socket's desired and observed state.
type Input struct {
	Desired  Desired
	Observed Observed
	// SyncDeletes: a listener's deletes run without del_async
	// (ListenerOptions.SyncDeletes), and the plan says so.
	SyncDeletes bool
}

// PlanAll plans every socket independently.
func PlanAll(in []Input) Plan {
	p := make(Plan, len(in))
	for i := range in {
		p[i] = PlanSocket(in[i].Desired, in[i].Observed)
		if in[i].SyncDeletes && p[i].Kind == Listening {
			ranSync(p[i].Ops)
		}
	}
	return p
}

func normRef(r tcpao.KeyRef) tcpao.KeyRef {
	if r.Peer.Bits() != r.Peer.Addr().BitLen() { // a host prefix is masked already
		r.Peer = r.Peer.Masked()
	}
	return r
}

// refKey is a KeyRef as a small comparable value without pointers or
// padding, which a map hashes as 24 plain bytes: the planner's maps over
// thousands of keys hashed the 48-byte KeyRef (netip.Prefix and its zone
// handle) field by field. keyOf(normRef(a)) == keyOf(normRef(b)) exactly
// when normRef(a) == normRef(b) (for ifindexes that fit in 32 bits, the
// kernel's __s32).
type refKey struct {
	addr [16]byte
	meta uint64 // ifindex<<32 | prefix bits<<24 | SendID<<16 | RecvID<<8 | flags
}

const (
	refKey4       = 1 << 0 // IPv4 address
	refKeyInvalid = 1 << 1 // invalid prefix
)

// keyOf is the refKey of r, which the caller has normalised.
func keyOf(r tcpao.KeyRef) refKey {
	k := prefixKey(r.Peer)
	k.meta |= uint64(uint32(r.IfIndex))<<32 | uint64(r.SendID)<<16 | uint64(r.RecvID)<<8
	return k
}

// prefixKey is the refKey of a peer prefix alone (IDs and ifindex zero).
func prefixKey(p netip.Prefix) refKey {
	a := p.Addr()
	k := refKey{addr: a.As16(), meta: uint64(uint8(p.Bits())) << 24}
	if a.Is4() {
		k.meta |= refKey4
	}
	if !p.IsValid() {
		k.meta |= refKeyInvalid
	}
	return k
}

// conflicts reports whether adding n to a socket that holds e makes the
// kernel answer EEXIST: overlapping peer prefixes (compared at the shorter
// length), a compatible VRF (an existing key without ifindex matches every
// VRF), and an equal SendID or RecvID.
func conflicts(e, n tcpao.KeyRef) bool {
	if e.SendID != n.SendID && e.RecvID != n.RecvID {
		return false
	}
	if e.IfIndex != 0 && e.IfIndex != n.IfIndex {
		return false
	}
	return prefixesOverlap(e.Peer, n.Peer)
}

func prefixesOverlap(a, b netip.Prefix) bool {
	if a.Addr().Is4() != b.Addr().Is4() {
		return false
	}
	// The kernel treats the any-address as matching everything.
	if a.Bits() == 0 || b.Bits() == 0 {
		return true
	}
	return a.Overlaps(b)
}

// Same reports whether d and o are the same desired state, comparing key
// material through fingerprints only. Retire is the machine's own (its
// retire step) and is not compared.
func (d Desired) Same(o Desired) bool {
	if d.Socket != o.Socket || d.Kind != o.Kind || d.WantCurrent != o.WantCurrent || d.WantRNext != o.WantRNext ||
		d.AORequired != o.AORequired || len(d.Keys) != len(o.Keys) || !slices.Equal(d.Revoked, o.Revoked) ||
		!slices.Equal(d.Replace, o.Replace) || !slices.Equal(d.Frozen, o.Frozen) || d.Owner != o.Owner {
		return false
	}
	for i := range d.Keys {
		x, y := d.Keys[i], o.Keys[i]
		if x.KeyRef != y.KeyRef || x.Algorithm != y.Algorithm || x.MACLen != y.MACLen ||
			x.ExcludeOptions != y.ExcludeOptions || x.AcceptOnly != y.AcceptOnly ||
			x.Secret.Fingerprint() != y.Secret.Fingerprint() {
			return false
		}
	}
	return true
}
