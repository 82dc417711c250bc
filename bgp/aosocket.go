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

// AddMD5 and DelMD5 are TCP_MD5SIG_EXT on the borrowed descriptor.
func (s aoSocket) AddMD5(k tcpao.MD5Key) error {
	return s.h.Do(func(fd int) error { return tcpao.AddMD5(tcpao.FromFD(fd), k) })
}

func (s aoSocket) DelMD5(r tcpao.MD5Ref) error {
	return s.h.Do(func(fd int) error { return tcpao.DelMD5(tcpao.FromFD(fd), r) })
}

// ArmPeerProbe and EndPeerProbe are tcpao.PeerProber on the borrowed
// descriptor.
func (s aoSocket) ArmPeerProbe() (tcpao.PeerProbe, error) {
	var p tcpao.PeerProbe
	err := s.h.Do(func(fd int) error {
		var err error
		p, err = tcpao.ArmPeerProbe(tcpao.FromFD(fd))
		return err
	})
	return p, err
}

func (s aoSocket) EndPeerProbe(p tcpao.PeerProbe) error {
	return s.h.Do(func(fd int) error { return tcpao.EndPeerProbe(tcpao.FromFD(fd), p) })
}
