package control

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration that writes JSON as a number of seconds
// (3600, 0.003): every duration in aoctl's --json output and on the
// control socket reads the same way, with no unit to parse. It reads a
// number of seconds, or Go's duration text ("1h2m3s") as aokeyd wrote it
// before, so that an aoctl reads the daemon it replaces until that
// restarts.
type Duration time.Duration

// MarshalJSON implements json.Marshaler: the duration in seconds.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Seconds()) }

// Seconds is the duration in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

// String is time.Duration's String.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalJSON implements json.Unmarshaler: a number of seconds, or Go's
// duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err == nil {
		v := secs * float64(time.Second)
		if math.IsNaN(v) || v >= math.MaxInt64 || v < math.MinInt64 {
			return fmt.Errorf("duration: %v seconds out of range", secs)
		}
		*d = Duration(math.Round(v))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a number of seconds: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// PlanReport is GET /v1/plan (and what `aoctl plan` computes offline).
type PlanReport struct {
	GeneratedAt time.Time `json:"generated_at"`
	// Observed: the plan is against the kernel state the daemon read;
	// false: against sockets with no keys (offline plan).
	Observed bool `json:"observed"`
	// Plan is rotator.Render's output, one line per entry.
	Plan []string `json:"plan"`
	// Steps (aoctl plan --config) are Plan's lines as objects, one per
	// line, in order: each names the key's chain and name where the key
	// source has them.
	Steps []PlanStep `json:"steps,omitempty"`
	// Horizon (aoctl plan --config) is how far ahead Upcoming looked
	// (seconds in JSON); 0 when unbounded.
	Horizon Duration `json:"horizon,omitempty"`
	// Upcoming are the next scheduled changes per peer.
	Upcoming []Event `json:"upcoming"`
	// Problems (offline plan) are the key source's rejected keys, in
	// aoctl validate's words, and each peer the plan leaves without a
	// key to send with; aoctl plan exits 4 when there are any.
	Problems []string `json:"problems,omitempty"`
}

// PlanStep is one step of a plan (rotator.PlanLine): an op on a socket's
// keys, a key held, or a socket with nothing to do. It never holds key
// material.
type PlanStep struct {
	// Socket is the key set ("peer 192.0.2.2", "peer 192.0.2.2 vrf red").
	Socket string `json:"socket"`
	// Kind is listening or established.
	Kind string `json:"kind"`
	// Op is add, del or set; edit (an edit in place applied: Reason is
	// its EditRule); defer, blocked or kept (a key held); ok.
	Op string `json:"op"`
	// KeyRef is the kernel key the step is about; nil for set and ok.
	KeyRef *PlanKeyRef `json:"key_ref,omitempty"`
	// Chain and Key name the key in the key source, "" when it has no
	// key of those IDs for the socket (or more than one).
	Chain string `json:"chain,omitempty"`
	Key   string `json:"key,omitempty"`
	// Reason is why the step is there ("new", "ao-required", "stale";
	// an edit's rule, "applied-unused").
	Reason string `json:"reason,omitempty"`
	// Text is the step's line of Plan.
	Text string `json:"text"`
}

// PlanKeyRef is a kernel key reference: its IDs, peer and L3 device.
type PlanKeyRef struct {
	SendID  uint8  `json:"send_id"`
	RecvID  uint8  `json:"recv_id"`
	Peer    string `json:"peer"`
	IfIndex int    `json:"ifindex,omitempty"`
}

// Event is one scheduled change of a peer's desired keys.
type Event struct {
	Peer   string    `json:"peer"`
	VRF    string    `json:"vrf"`
	Chain  string    `json:"chain"`
	At     time.Time `json:"at"`
	Action string    `json:"action"`
}

// RotateRequest is POST /v1/rotate: one peer, or all.
type RotateRequest struct {
	Peer string `json:"peer,omitempty"`
	VRF  string `json:"vrf,omitempty"`
	All  bool   `json:"all,omitempty"`
}

// RotateResult is the answer to a RotateRequest.
type RotateResult struct {
	Peers []RotateOutcome `json:"peers"`
}

// RotateOutcome is one peer's answer to a rotate request.
type RotateOutcome struct {
	// Seq is the last roll step the daemon had recorded (every peer's)
	// when it answered: GET /v1/rolls after it follows this rotation.
	Seq     uint64    `json:"seq,omitempty"`
	Peer    string    `json:"peer"`
	VRF     string    `json:"vrf"`
	Started bool      `json:"started"`
	State   string    `json:"state"`
	NextAt  time.Time `json:"next_at,omitzero"`
	Detail  string    `json:"detail,omitempty"` // why nothing started
	Error   string    `json:"error,omitempty"`
}

// RevokeRequest is POST /v1/revoke: remove key Key of chain Chain from every
// socket at once and mark it revoked in the source; or, with Peer (and
// VRF, "" for the default VRF), from that peer's sockets only, leaving the
// shared source alone.
type RevokeRequest struct {
	Chain string `json:"chain"`
	Key   string `json:"key"`
	Peer  string `json:"peer,omitempty"`
	VRF   string `json:"vrf,omitempty"`
}

// SocketAction is what a revoke or a replace did on one socket; its text
// is the word aoctl prints and the revoke metric's label.
type SocketAction string

// Revoke and replace outcomes per socket.
const (
	ActionDeleted        SocketAction = "deleted"         // deleted (del_async on listeners)
	ActionForcedReplaced SocketAction = "forced-replaced" // was current/rnext: forced delete naming Replacement
	ActionReset          SocketAction = "reset"           // it was the only key: removed, the session resets
	ActionKept           SocketAction = "kept"            // it was the only key and policy says keep
	ActionAbsent         SocketAction = "absent"          // the socket did not carry the key
	ActionUnchanged      SocketAction = "unchanged"       // replace: the socket already had the new material
	ActionError          SocketAction = "error"           // the socket was not changed: see Error
)

// RevokeResult is the answer to a RevokeRequest.
type RevokeResult struct {
	Chain string `json:"chain"`
	Key   string `json:"key"`
	// Peer and VRF: the revoke was scoped to this peer; the key source is
	// then not written (it is shared by every peer).
	Peer string `json:"peer,omitempty"`
	VRF  string `json:"vrf,omitempty"`
	// SourceRevoked: the key is marked revoked in the key source.
	SourceRevoked bool   `json:"source_revoked"`
	SourceError   string `json:"source_error,omitempty"`
	// RecordError: the revocation is recorded and in force, but a write
	// failed that could not be undone: its record's backup is behind, or
	// the record may not survive a crash. (A revoke that could not be
	// recorded fails instead, and changes nothing.)
	RecordError string         `json:"record_error,omitempty"`
	Sockets     []RevokeSocket `json:"sockets"`
	Elapsed     Duration       `json:"elapsed"`
}

// RevokeSocket is one socket's revoke outcome.
type RevokeSocket struct {
	Socket      string       `json:"socket"`
	Peer        string       `json:"peer,omitempty"`
	Action      SocketAction `json:"action"`
	Replacement string       `json:"replacement,omitempty"`
	Error       string       `json:"error,omitempty"`
	// Warning: something the operator should know that is no failure of
	// the revoke (a key under the revoked key's IDs with other material:
	// not the revoked key, so kept). Never any key material.
	Warning string `json:"warning,omitempty"`
}

// Failed reports whether the revoke left the key somewhere, failed on a
// socket or in the source, or left its record degraded.
func (r RevokeResult) Failed() bool {
	if r.RecordError != "" {
		return true
	}
	if r.Peer == "" && (!r.SourceRevoked || r.SourceError != "") {
		return true
	}
	for _, s := range r.Sockets {
		if s.Error != "" || s.Action == ActionKept {
			return true
		}
	}
	return false
}

// ReplaceRequest is POST /v1/replace: apply the new material the key
// source has under the IDs of installed key Key of chain Chain (an edit in
// place, which aokeyd otherwise holds back) on every socket, resetting the
// sessions that have no other key the peer was seen to use.
type ReplaceRequest struct {
	Chain string `json:"chain"`
	Key   string `json:"key"`
	// MD5 applies the chain's changed TCP-MD5 password instead (Key
	// empty): the listeners take it and the peers' sessions are reset
	// to reconnect with it (the far end must have it).
	MD5 bool `json:"md5,omitempty"`
}

// ActionReplaced is a replace's outcome on a socket that took the new
// material in place (a session: by one forced delete naming a key the peer
// was seen to use, then the add).
const ActionReplaced SocketAction = "replaced"

// ReplaceResult is the answer to a ReplaceRequest: each socket's outcome
// (ActionReplaced, ActionReset, ActionUnchanged, ActionAbsent or
// ActionError).
type ReplaceResult struct {
	Chain   string         `json:"chain"`
	Key     string         `json:"key"`
	Sockets []RevokeSocket `json:"sockets"`
	Elapsed Duration       `json:"elapsed"`
}

// Failed reports whether a socket's replace failed.
func (r ReplaceResult) Failed() bool {
	for _, s := range r.Sockets {
		if s.Error != "" {
			return true
		}
	}
	return false
}

// AdoptRequest is POST /v1/adopt: hand the keys for peer Peer (in VRF VRF)
// that another agent installed on its session's socket and on the
// speaker's listeners (foreign keys, which aokeyd keeps and never changes)
// to aokeyd, which from then on treats them as its own: kept while
// desired or carrying the session, retired otherwise.
//
// Only keys of the peer's host prefix are taken, unless Prefix names a
// wider one that contains the peer: then the keys of exactly that prefix
// are, and the adopt is refused while another neighbor relies on it (an
// established session of another peer inside it, or a neighbor inside it
// that aokeyd does not manage).
type AdoptRequest struct {
	Peer   string `json:"peer"`
	VRF    string `json:"vrf,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// AdoptedKey is one key an adopt handed to aokeyd.
type AdoptedKey struct {
	Socket string `json:"socket"` // "session" or "listener <address>"
	Prefix string `json:"prefix"`
	SendID uint8  `json:"send_id"`
	RecvID uint8  `json:"recv_id"`
}

// AdoptResult is the answer to an AdoptRequest.
type AdoptResult struct {
	Peer    string       `json:"peer"`
	VRF     string       `json:"vrf,omitempty"`
	Adopted []AdoptedKey `json:"adopted"`
	// Left are the foreign keys for the peer under another prefix than
	// the one adopted (one that contains the peer), left foreign: adopt
	// without Prefix takes the host prefix's, Prefix names a wider one.
	Left []AdoptedKey `json:"left,omitempty"`
}

// MigrateRequest is POST /v1/migrate: move the TCP-MD5 peer Peer (in VRF
// VRF), or All of them, to TCP-AO, the far end switching at At (zero:
// now), rolled back when no TCP-AO session is up Bound after it (zero:
// the daemon's default). Abort rolls a migration back now.
type MigrateRequest struct {
	Peer  string    `json:"peer,omitempty"`
	VRF   string    `json:"vrf,omitempty"`
	All   bool      `json:"all,omitempty"`
	At    time.Time `json:"at,omitzero"`
	Bound Duration  `json:"bound,omitempty"`
	Abort bool      `json:"abort,omitempty"`
}

// Migration is one peer's move from TCP-MD5 to TCP-AO.
type Migration struct {
	Peer string `json:"peer"`
	VRF  string `json:"vrf,omitempty"`
	// Step: prepared, switching, done or rolled-back.
	Step string `json:"step"`
	// Prefix is where the peer's TCP-AO keys sit on the listener.
	Prefix   string    `json:"prefix"`
	At       time.Time `json:"at"`
	Deadline time.Time `json:"deadline"`
	Since    time.Time `json:"since"`
	Reason   string    `json:"reason,omitempty"`
}

// MigrateResult is the answer to a MigrateRequest: the migrations it
// started or changed.
type MigrateResult struct {
	Migrations []Migration `json:"migrations"`
}

// HealthReport is GET /v1/health.
type HealthReport struct {
	Status  string    `json:"status"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started,omitzero"`
}
