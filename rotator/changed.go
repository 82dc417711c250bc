package rotator

import "github.com/aokeyd/aokeyd/tcpao"

// keyView is what a machine's status shows of the session's keys; the
// controller reports a step that changed it (Options.Changed).
type keyView struct {
	state       State
	cur, rnext  OptID
	pending     tcpao.KeyRef
	havePending bool
	writes      uint64
}

func (m *machine) keyView() keyView {
	return keyView{state: m.st.State, cur: m.st.Current, rnext: m.st.RNext, pending: m.st.Pending, havePending: m.st.HavePending, writes: m.writes}
}
