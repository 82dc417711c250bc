package rotator

import "fmt"

// AbortReason classifies why a roll was aborted, for metrics and status.
// Callers classify by it, never by the text of the error.
type AbortReason uint8

// Abort reasons, one per way a roll can end early. The old key is kept in
// every case and the roll is retried after a backoff.
const (
	// AbortNone: no roll was aborted.
	AbortNone AbortReason = iota
	// AbortSwitchTimeout: the peer did not send with the announced key
	// within Config.SwitchTimeout.
	AbortSwitchTimeout
	// AbortGuardRefused: the SessionGuard's Before refused a step (the
	// session is not established, or its state could not be read); the
	// step was not run.
	AbortGuardRefused
	// AbortSessionDropped: the SessionGuard's After found that the session
	// dropped (or came back on another connection) while the step ran.
	AbortSessionDropped
	// AbortKernelError: a TCP-AO socket option of the step failed.
	AbortKernelError
)

// String is the reason's metric label and status word: "", "switch-timeout",
// "guard-refused", "session-down" or "kernel-error".
func (r AbortReason) String() string {
	switch r {
	case AbortNone:
		return ""
	case AbortSwitchTimeout:
		return "switch-timeout"
	case AbortGuardRefused:
		return "guard-refused"
	case AbortSessionDropped:
		return "session-down"
	case AbortKernelError:
		return "kernel-error"
	}
	return fmt.Sprintf("abort-reason-%d", uint8(r))
}

// AbortError is why a roll was aborted. errors.Is and errors.As reach the
// SessionGuard's or the kernel's error through it (Err); Reason classifies
// it.
type AbortError struct {
	Reason AbortReason
	// Step is the step that failed; "" for a switch timeout.
	Step Step
	// Detail says what the roll was doing, for people.
	Detail string
	// Err is the guard's or the socket's error, wrapped with the step; nil
	// for a switch timeout.
	Err error
	// Restore is the error of putting RNext_key back after the abort (nil
	// when it was put back or did not need to be). It is reported in the
	// text only: the abort's reason is Err's.
	Restore error
}

func (e *AbortError) Error() string {
	s := e.Detail
	if e.Err != nil {
		if s != "" {
			s += ": "
		}
		s += e.Err.Error()
	}
	if e.Restore != nil {
		s += "; " + e.Restore.Error()
	}
	return s
}

// Unwrap returns the guard's or the socket's error.
func (e *AbortError) Unwrap() error { return e.Err }
