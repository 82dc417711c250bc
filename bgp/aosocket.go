package bgp

import "github.com/aokeyd/aokeyd/tcpao"

// AOSocket is the TCP-AO surface of one of the speaker's sockets for code
// that wants a long-lived tcpao.Socket (the rotator): every call borrows the
// socket through h (pidfd_getfd), runs the one socket option on the
// duplicate with tcpao.FromFD and closes it, so aokeyd never holds the
// speaker's socket open between calls.
func AOSocket(h SocketHandle) tcpao.Socket { return aoSocket{h} }

type aoSocket struct{ h SocketHandle }

var _ tcpao.Socket = aoSocket{}

func (s aoSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	return s.h.Do(func(fd int) error { return tcpao.FromFD(fd).AddKey(k, o) })
}

func (s aoSocket) DelKey(d tcpao.DelKey) error {
	return s.h.Do(func(fd int) error { return tcpao.FromFD(fd).DelKey(d) })
}

func (s aoSocket) Info() (tcpao.Info, error) {
	var i tcpao.Info
	err := s.h.Do(func(fd int) error {
		var err error
		i, err = tcpao.FromFD(fd).Info()
		return err
	})
	return i, err
}

func (s aoSocket) SetInfo(c tcpao.InfoChange) error {
	return s.h.Do(func(fd int) error { return tcpao.FromFD(fd).SetInfo(c) })
}

func (s aoSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	var ks []tcpao.KeyInfo
	err := s.h.Do(func(fd int) error {
		var err error
		ks, err = tcpao.FromFD(fd).Keys(f)
		return err
	})
	return ks, err
}

// BatchKeys runs f with the socket borrowed once: every call f makes on
// its Socket is a bare socket option on the one duplicate (the rotator
// reads INFO and GET_KEYS, and applies a plan's ops, this way). The Socket
// must not be used after f returns.
func (s aoSocket) BatchKeys(f func(tcpao.Socket) error) error {
	return s.h.Do(func(fd int) error { return f(tcpao.FromFD(fd)) })
}
