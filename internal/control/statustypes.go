package control

import (
	"fmt"
	"time"
)

// Socket kinds.
const (
	KindListen      = "listen"
	KindEstablished = "established"
)

// The peer authentications of PeerStatus.Auth.
const (
	AuthNone = "none"
	AuthMD5  = "tcp-md5"
	AuthAO   = "tcp-ao"
	// AuthMigrating is followed by the migration's step in parentheses.
	AuthMigrating = "migrating"
)

// Key states.
const (
	KeyInstalled = "installed" // on the socket and desired
	KeyPending   = "pending"   // desired, being rolled to (installed, announced or not yet)
	KeyRetiring  = "retiring"  // no longer desired, waiting for the peer to stop using it
	KeyRevoked   = "revoked"   // revoked in the source; kept only when it is the last key
)

// StatusReport is GET /v1/status.
type StatusReport struct {
	GeneratedAt time.Time `json:"generated_at"`
	// Speaker names the BGP speaker whose view of the sessions the report
	// shows (session state, uptime), e.g. "gobgpd unix:///run/gobgpd.sock"
	// or "frr bgpd /run/frr/bgpd.vty".
	Speaker   string          `json:"speaker,omitempty"`
	KeySource KeySourceStatus `json:"key_source"`
	Optmem    Optmem          `json:"optmem"`
	// Kernel is the running kernel and the TCP-AO algorithms it accepts,
	// as aokeyd probed them at start; nil when not probed.
	Kernel *KernelStatus `json:"kernel,omitempty"`
	// StartUpGate, while it holds, says why the listener sync deletes
	// nothing yet; nil once it opened.
	StartUpGate *StartUpGate `json:"start_up_gate,omitempty"`
	Peers       []PeerStatus `json:"peers"`
	// ListenerFaults are the speaker's listening sockets the last listener
	// sync found unable to carry TCP-AO keys for a reason only the
	// operator can fix; each also has a warning (Complete).
	ListenerFaults []ListenerFault `json:"listener_faults,omitempty"`
	// Chains are the policy's key chains as Junos' show security keychain
	// shows them: the key the chain's peers send with now, the next one
	// and when (aoctl status --keys). Only in a report of every peer.
	Chains []ChainStatus `json:"chains,omitempty"`
	// Warnings concern the whole daemon (stale key source, optmem).
	Warnings []string `json:"warnings,omitempty"`
}

// Listener fault reasons (ListenerFault.Reason).
const (
	// ListenerMPTCP: the listener is a Multipath TCP socket (SO_PROTOCOL
	// IPPROTO_MPTCP), which refuses every TCP-AO and TCP-MD5 key: Go 1.24
	// and later listen so by default on kernels with CONFIG_MPTCP.
	ListenerMPTCP = "mptcp"
)

// ListenerFault is one of the speaker's listening sockets that cannot carry
// TCP-AO keys until the speaker runs otherwise.
type ListenerFault struct {
	Reason  string `json:"reason"` // ListenerMPTCP
	Local   string `json:"local"`  // the listener's address, "0.0.0.0:179"
	Port    uint16 `json:"port"`
	PID     int    `json:"pid"`
	Process string `json:"process,omitempty"` // the process's command name
}

// KernelStatus is the kernel aokeyd runs on: its release and the TCP-AO
// algorithms it accepts and refuses (one scratch key each at start), and
// the known TCP-AO defects of the release with what aokeyd does about them.
type KernelStatus struct {
	Release  string   `json:"release"`
	Accepted []string `json:"accepted"`
	Refused  []string `json:"refused,omitempty"`
	// Defects are the known TCP-AO defects of the release
	// (tcpao.KernelDefects); Complete warns of each.
	Defects []KernelDefect `json:"defects,omitempty"`
	// Unplaced says why the release could not be checked against the known
	// defects (a release not understood, or a version older than TCP-AO
	// upstream: a vendor backport); aokeyd then takes every mitigation,
	// and Complete warns.
	Unplaced string `json:"unplaced,omitempty"`
	// Mitigation is what aokeyd does on this kernel for Defects or
	// Unplaced ("" nothing).
	Mitigation string `json:"mitigation,omitempty"`
}

// KernelDefect is one known TCP-AO defect of the running kernel.
type KernelDefect struct {
	ID         string `json:"id"`       // "CVE-2026-53389"
	Summary    string `json:"summary"`  // one line
	FixedIn    string `json:"fixed_in"` // "6.12.95, 6.18.38, 7.1.3, 7.2 and later"
	Mitigation string `json:"mitigation"`
}

// KeySourceStatus is the key source's health.
type KeySourceStatus struct {
	Name      string    `json:"name"`
	LastSync  time.Time `json:"last_sync,omitzero"`
	Age       Duration  `json:"age"`
	Stale     bool      `json:"stale"`
	LastError string    `json:"last_error,omitempty"`
	// Held lists the chains and keys a successful read lost and aokeyd
	// holds back (see HeldKey); each also has a warning.
	Held []HeldKey `json:"held,omitempty"`
}

// Hold reasons (HeldKey.Reason).
const (
	HeldKeyRejected  = "key-rejected"  // the source's entry fails validation
	HeldChainMissing = "chain-missing" // the source no longer has the chain
	HeldNoUsableKey  = "no-usable-key" // the chain lists no usable key
)

// HeldKey is a chain or key of the key source that a read lost: the key
// was rejected, the chain vanished or was left without a usable key.
// LastGood: its last good version stays installed; false: no good version
// is known (aokeyd restarted meanwhile), so nothing the chain's bindings
// have installed is deleted or switched until the source is fixed.
type HeldKey struct {
	Chain    string `json:"chain"`
	Key      string `json:"key,omitempty"` // "" for the whole chain
	Reason   string `json:"reason"`
	Field    string `json:"field,omitempty"`
	Source   string `json:"source,omitempty"`
	LastGood bool   `json:"last_good"`
}

// Optmem compares net.core.optmem_max with what the largest key set of a
// socket needs.
type Optmem struct {
	Limit  int `json:"limit"`
	Needed int `json:"needed"`
}

// PeerStatus is one BGP neighbor.
type PeerStatus struct {
	// Peer is the neighbor's address; for an interface neighbour
	// (Interface set) the address it learned on its link, "" before it
	// learned one.
	Peer string `json:"peer"`
	// Interface is an interface neighbour's interface (FRR's `neighbor
	// swp1 interface`), its identity with VRF: "" for a neighbor by
	// address. Shown returns the two together.
	Interface    string `json:"interface,omitempty"`
	VRF          string `json:"vrf"`
	SessionState string `json:"session_state"`
	// Auth is how the peer's sessions authenticate: AuthNone, AuthMD5 or
	// AuthAO.
	Auth string `json:"auth"`
	// Local is the session's local address as the speaker reports it
	// ("" when down).
	Local string `json:"local,omitempty"`
	// Uptime is how long the session has been established.
	Uptime Duration `json:"uptime"`
	// Passive: the BGP daemon does not initiate the session (needed for a
	// hitless key set change on the listener).
	Passive bool `json:"passive"`
	// ActiveOpensKeyed: the BGP daemon's own connects to the neighbor
	// carry its keys (it runs under aokeyd exec), so a neighbor that is
	// not passive is managed too.
	ActiveOpensKeyed bool `json:"active_opens_keyed"`

	// PeerAS is the peer's AS and Description the neighbor's description,
	// as the speaker reports them (0, "": not reported).
	PeerAS      uint32 `json:"peer_as,omitempty"`
	Description string `json:"description,omitempty"`
	// Flaps counts how often the session went down from Established, as
	// the speaker counts.
	Flaps uint32 `json:"flaps"`
	// LastDown is when the session last went down and LastDownReason why,
	// in the speaker's words (zero, "": not reported).
	LastDown       time.Time `json:"last_down,omitzero"`
	LastDownReason string    `json:"last_down_reason,omitempty"`
	// Sending is the key this router sends with: the session's
	// Current_key as the kernel reports it (the peer's RNextKeyID selects
	// it). nil: no session, or no Current_key.
	Sending *KeyName `json:"sending,omitempty"`
	// PeerSending is the key the peer sends with: the session's RNext_key
	// as the kernel reports it, the key this router asks the peer to send
	// with (a TCP-AO peer takes it with our next segment). While a roll
	// waits for the peer to take a new RNext_key (rotation announced) it
	// is the RNext_key before, and PeerAsked the one announced.
	PeerSending *KeyName `json:"peer_sending,omitempty"`
	PeerAsked   *KeyName `json:"peer_asked,omitempty"`

	Sockets  []Socket `json:"sockets"`
	Keys     []Key    `json:"keys"`
	Rotation Rotation `json:"rotation"`
	// EarlyRoll is the peer's aoctl rotate while it governs the key the
	// peer sends with, or the last one that ended before the schedule
	// reached its key (until that key's send start); nil: none.
	EarlyRoll *EarlyRoll `json:"early_roll,omitempty"`
	Counters  Counters   `json:"counters"`
	// Listener is what the listening sockets count for the peer's
	// address: a session that is down is re-established through them.
	Listener *ListenerCounters `json:"listener,omitempty"`
	// Migration is the peer's move from TCP-MD5 to TCP-AO, if any.
	Migration *Migration `json:"migration,omitempty"`
	// Edits are the edits in place of the peer's keys, on its session and
	// its listener entry, and which rule decided each.
	Edits    []EditStatus `json:"edits,omitempty"`
	Warnings []string     `json:"warnings,omitempty"`
}

// Socket is a managed socket of the BGP daemon.
type Socket struct {
	Kind   string `json:"kind"` // KindListen or KindEstablished
	Local  string `json:"local"`
	Remote string `json:"remote,omitempty"`
	Inode  uint64 `json:"inode"`
}

// Lifetime is a key lifetime; zero Start: since ever, zero End: for ever.
type Lifetime struct {
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
}

// Key is one MKT as installed (or to be installed) for the peer. It has no
// field for key bytes.
type Key struct {
	Chain  string `json:"chain"`
	Name   string `json:"name"`
	SendID uint8  `json:"send_id"`
	RecvID uint8  `json:"recv_id"`
	Alg    string `json:"alg"`
	MACLen uint8  `json:"maclen"`
	// TCPOptions is TCPOptionsInclude or TCPOptionsExclude: whether the
	// MAC covers TCP options other than TCP-AO. Both ends must agree.
	TCPOptions     string   `json:"tcp_options"`
	SendLifetime   Lifetime `json:"send_lifetime"`
	AcceptLifetime Lifetime `json:"accept_lifetime"`
	Current        bool     `json:"current"`
	RNext          bool     `json:"rnext"`
	PktGood        uint64   `json:"pkt_good"`
	PktBad         uint64   `json:"pkt_bad"`
	State          string   `json:"state"`
}

// KeyName names an MKT by its chain and name in the key source (empty when
// the key source has no key of its IDs) and its IDs.
type KeyName struct {
	Chain  string `json:"chain,omitempty"`
	Name   string `json:"name,omitempty"`
	SendID uint8  `json:"send_id"`
	RecvID uint8  `json:"recv_id"`
}

// String is CHAIN/NAME, or the IDs for a key the source does not name.
func (k KeyName) String() string {
	if k.Name == "" {
		return fmt.Sprintf("send=%d recv=%d", k.SendID, k.RecvID)
	}
	return k.Chain + "/" + k.Name
}

// ChainStatus is one key chain of the policy: the key its peers send with
// now, the next key and when the chain changes to it, and the keys a peer
// of the chain holds now.
type ChainStatus struct {
	Chain string `json:"chain"`
	// Bindings is how many of the policy's bindings use the chain.
	Bindings int `json:"bindings"`
	// Sending is the key to send with now (nil: none is send-valid).
	Sending *ChainKey `json:"sending,omitempty"`
	// Next is the key sent with from NextAt on (nil: no change ahead
	// within the key source's lifetimes).
	Next   *ChainKey  `json:"next,omitempty"`
	NextAt time.Time  `json:"next_at,omitzero"`
	Keys   []ChainKey `json:"keys"`
	// Problem says why the chain's keys could not be computed.
	Problem string `json:"problem,omitempty"`
}

// ChainKey is one key of a chain with its lifetimes (no key material).
type ChainKey struct {
	Name           string   `json:"name"`
	SendID         uint8    `json:"send_id"`
	RecvID         uint8    `json:"recv_id"`
	SendLifetime   Lifetime `json:"send_lifetime"`
	AcceptLifetime Lifetime `json:"accept_lifetime"`
}

// Rotation is the peer's rotation state machine (rotator.Status).
// LastAbortReason classifies the last aborted roll with the words of the
// rotations_aborted_total reason label (rotator.AbortReason: e.g.
// "switch-timeout", "session-down"); LastAbort says what happened.
type Rotation struct {
	State      string    `json:"state"`
	PendingKey string    `json:"pending_key,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	NextAction string    `json:"next_action,omitempty"`
	NextAt     time.Time `json:"next_at,omitzero"`
	// Waiting says what a step of the roll that has not returned yet
	// waits for ("speaker: session state of 192.0.2.9", "kernel: install
	// on the socket"); empty when none is running.
	Waiting         string `json:"waiting,omitempty"`
	LastAbortReason string `json:"last_abort_reason,omitempty"`
	LastAbort       string `json:"last_abort,omitempty"`
}

// The states of an EarlyRoll.
const (
	// EarlyRolling: aokeyd rolls the peer to Key; the roll has not
	// completed yet.
	EarlyRolling = "rolling"
	// EarlyHeld: the roll completed; the peer sends with Key until the
	// schedule does (KeyStart), not going back to the schedule's key.
	EarlyHeld = "held"
	// EarlyEnded: the request ended before the schedule reached Key
	// (Ended says why: the roll aborted, the session went down, the key
	// left the key source): the schedule governs again, and nothing is
	// retried until an operator runs aoctl rotate again.
	EarlyEnded = "ended"
)

// EarlyRoll is an operator's aoctl rotate of the peer: a roll, once, to
// the key that was the newest for it in the key source when they asked,
// ahead of that key's send start.
type EarlyRoll struct {
	Key KeyName `json:"key"`
	// KeyStart is Key's send start: from then on the schedule sends with
	// it, and the request has done its work.
	KeyStart time.Time `json:"key_start,omitzero"`
	AskedAt  time.Time `json:"asked_at"`
	State    string    `json:"state"` // EarlyRolling, EarlyHeld or EarlyEnded
	EndedAt  time.Time `json:"ended_at,omitzero"`
	Ended    string    `json:"ended,omitempty"` // why it ended (EarlyEnded)
}

// Counters are the socket-level TCP_AO_INFO counters of the peer's
// established socket.
type Counters struct {
	PktGood        uint64 `json:"pkt_good"`
	PktBad         uint64 `json:"pkt_bad"`
	PktKeyNotFound uint64 `json:"pkt_key_not_found"`
	PktAORequired  uint64 `json:"pkt_ao_required"`
	PktDroppedICMP uint64 `json:"pkt_dropped_icmp"`
}

// Shown is the peer for people, without its VRF: its address, or an
// interface neighbour's interface with the address it peers with, "swp1
// (fe80::1)", "swp1 (none)" before it learned one (peer.Key.Shown).
func (p PeerStatus) Shown() string {
	if p.Interface == "" {
		return p.Peer
	}
	if p.Peer == "" {
		return p.Interface + " (none)"
	}
	return p.Interface + " (" + p.Peer + ")"
}
