package rotator

import (
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// State is where a peer's state machine is.
type State string

// States.
const (
	StateSteady    State = "steady"    // nothing to do: keys and current/rnext as desired
	StateAnnounced State = "announced" // new key installed and announced; waiting for the peer to send with it
	StateGrace     State = "grace"     // new key current; old key deleted after the grace period once unused
	StateBackoff   State = "backoff"   // the last roll was aborted; retry at NextAt
	StateDown      State = "down"      // no socket
)

// Status is one peer's state as aoctl shows it. It never holds key
// material.
type Status struct {
	Peer    PeerID
	State   State
	Current OptID // SendID of Current_key as last read
	RNext   OptID // RecvID of RNext_key as last read
	// HavePending is false when no key is being rolled to (Pending).
	// (The small fields sit together: at 512 bytes a Status is one size
	// class below 520's, 64 bytes a peer in its published copy;
	// TestStatusSize.)
	HavePending bool
	// AnnouncedFrom is RNext_key (a RecvID) as it was before the roll
	// announced Pending: the key the peer sent with, while the roll waits
	// for it to take the new one (StateAnnounced).
	AnnouncedFrom OptID
	// SettleBaseSet: SettleBase holds a base (with the small fields, in
	// the byte after AnnouncedFrom: an interface neighbour's link made
	// Peer 8 bytes longer).
	SettleBaseSet bool
	// Pending is the key being rolled to (HavePending false when none).
	Pending    tcpao.KeyRef
	Since      time.Time // when State was entered
	NextAction string
	NextAt     time.Time
	// LastAbort says why the last roll was aborted, for people ("": none).
	LastAbort string
	// LastAbortReason classifies it, for metrics and status.
	LastAbortReason AbortReason
	// LastAbortErr is the *AbortError itself (nil: none): errors.Is and
	// errors.As reach the SessionGuard's or the socket's error through it.
	LastAbortErr error
	LastAbortAt  time.Time

	// Waiting says what a step that has not returned yet waits for ("":
	// none), e.g. "speaker: session state of 192.0.2.9" or "kernel:
	// install on the socket".
	Waiting string

	LastError string
	Rolls     int // completed rolls
	Attempts  int // aborted attempts since the last completed roll
	PktBad    uint64
	Deferred  int // stale keys waiting for the peer to stop using them
	Desired   int // keys in the machine's desired state
	// Kept are what the never-strand rule keeps on the socket that the
	// desired state would remove: keys that carry the session but are no
	// longer desired (ReasonCarried, from every read of the socket), and
	// installed keys whose new material is held back (ReasonEdited), keys
	// another agent installed (ReasonForeign), and desired keys not added
	// because a foreign key has their IDs (ReasonForeignClash: the roll
	// waits), the last three from the last plan. Immutable once published.
	Kept []Held
	// Edits are the edits in place on the socket: those the last full
	// plan held back, and those the machine applied while the desired
	// state holds their material (settle.go). Immutable once published.
	Edits []Edit
	// SettleBase is the socket's pkt_good that the machine waits to see
	// rise before an edit in place of a key that authenticated nothing
	// (Observed.Settled), when SettleBaseSet (Status.Settled).
	SettleBase uint64

	// Counters are the socket's counters as the machine last read them
	// (Counters.At zero: not read yet).
	Counters Counters
}
