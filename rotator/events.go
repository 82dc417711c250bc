package rotator

import (
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// EventKind says what happened to a peer's roll.
type EventKind uint8

const (
	// EventState: the machine entered another state (Event.State; From
	// is the one it left). A machine that starts on a new session sends
	// one too, with From equal to State.
	EventState EventKind = iota + 1
	// EventRollStarted: an attempt at a roll began (the machine's first
	// write towards new desired keys, from steady or after a backoff).
	// Every attempt ends with EventRollAborted or EventRollCompleted,
	// unless the session goes first or a new desired state makes the roll
	// unnecessary (then it ends with no event).
	EventRollStarted
	// EventRollAborted: the attempt ended early with the old key kept;
	// Event.Reason says why. The next attempt sends its own
	// EventRollStarted.
	EventRollAborted
	// EventRollCompleted: the roll retired the old keys.
	EventRollCompleted
)

// String is the kind's word in logs.
func (k EventKind) String() string {
	switch k {
	case EventState:
		return "state"
	case EventRollStarted:
		return "roll-started"
	case EventRollAborted:
		return "roll-aborted"
	case EventRollCompleted:
		return "roll-completed"
	}
	return "unknown"
}

// Event is one change of a peer's roll, sent to Options.Events from the
// peer's goroutine in the order it happened. It holds no key material.
type Event struct {
	Peer PeerID
	Kind EventKind
	At   time.Time
	// State is the machine's state after the event, From its state before
	// (they differ only for EventState).
	State, From State
	// Reason classifies an EventRollAborted; AbortNone otherwise.
	Reason AbortReason
	// Attempts is the number of aborted attempts since the last completed
	// roll, after the event (0 after EventRollCompleted).
	Attempts int
	// LastAbortReason is the reason of the latest of those attempts.
	LastAbortReason AbortReason
	// Pending is the key the roll goes to (HavePending false: none),
	// Current and RNext the socket's Current_key (a SendID) and RNext_key
	// (a RecvID) as the machine last read them, and Detail what an abort
	// says happened (Status.LastAbort): what aoctl rotate --wait prints of
	// each step. No key material.
	Pending        tcpao.KeyRef
	HavePending    bool
	Current, RNext OptID
	Detail         string
	// WantCurrent (a SendID) and WantRNext (a RecvID) are the preferred
	// key of the desired state the machine had (Desired.WantCurrent and
	// WantRNext): the key the roll that started, aborted or completed
	// went to. An abort has no Pending key any more; these still say
	// which roll it was (the daemon ends an aoctl rotate whose roll
	// aborted by them).
	WantCurrent, WantRNext OptID
}

// emit sends one event of the machine's peer, if anyone listens.
func (m *machine) emit(kind EventKind, now time.Time, from State, reason AbortReason) {
	if m.events == nil {
		return
	}
	e := Event{Peer: m.st.Peer, Kind: kind, At: now, State: m.st.State, From: from, Reason: reason,
		Attempts: m.st.Attempts, LastAbortReason: m.st.LastAbortReason,
		Pending: m.st.Pending, HavePending: m.st.HavePending, Current: m.st.Current, RNext: m.st.RNext,
		WantCurrent: m.desired.WantCurrent, WantRNext: m.desired.WantRNext}
	if kind == EventRollAborted {
		e.Detail = m.st.LastAbort
	}
	m.events(e)
}

// attemptStarts marks the start of a roll attempt, once per attempt.
func (m *machine) attemptStarts(now time.Time) {
	if !m.attempting {
		m.attempting = true
		m.emit(EventRollStarted, now, m.st.State, AbortNone)
	}
}
