package daemon

import (
	"errors"
	"slices"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// A speaker listening with Multipath TCP (Go 1.24 and later do by default
// on kernels with CONFIG_MPTCP: gobgpd v4) can take no TCP-AO key on its
// listener, so no AO session is ever accepted: not a failure aokeyd can
// retry its way out of, but one the operator fixes in how the speaker
// runs. It is told apart by type, never by text: tcpao.ErrMPTCP from the
// listener's keys (a listener found by its inode), or a
// *sockets.MPTCPError from discovery (one that is not). Each such listener
// is a fault in status, with the warning that names the fix, and one log
// line when it appears (the first pass runs at start-up) and one when it
// is gone.

// mptcpFault is the status entry for err, ok when err says the listener
// is Multipath TCP: a *sockets.MPTCPError names it; otherwise ref, the
// listener whose keys err refused, does.
func mptcpFault(err error, ref sockets.Ref) (control.ListenerFault, bool) {
	if !errors.Is(err, tcpao.ErrMPTCP) {
		return control.ListenerFault{}, false
	}
	var me *sockets.MPTCPError
	if !errors.As(err, &me) {
		me = &sockets.MPTCPError{PID: ref.PID, Comm: sockets.Comm(ref.PID), FD: ref.FD, Local: ref.Local}
	}
	return control.ListenerFault{Reason: control.ListenerMPTCP, Local: me.Local.String(), Port: me.Local.Port(),
		PID: me.PID, Process: me.Comm}, true
}

// noteListenerFaults makes faults, what the listener sync that just ran
// found, status's, and logs each new one with its fix at error level, and
// each one gone (the speaker restarted plain TCP, say).
func (rc *reconciler) noteListenerFaults(faults []control.ListenerFault) {
	rc.mu.Lock()
	before := rc.faults
	rc.faults = faults
	rc.mu.Unlock()
	for _, f := range faults {
		if !slices.Contains(before, f) {
			rc.log.Error(control.WarnListenerMPTCP(f.Port), "listener", f.Local, "pid", f.PID, "process", f.Process)
		}
	}
	for _, f := range before {
		if !slices.Contains(faults, f) {
			rc.log.Info("the speaker's listener is plain TCP now, or gone: TCP-AO keys go on it again", "listener", f.Local, "pid", f.PID)
		}
	}
}

// listenerFaults are the faults of the last listener sync.
func (rc *reconciler) listenerFaults() []control.ListenerFault {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.faults)
}
