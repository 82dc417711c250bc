package daemon

import (
	"syscall"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/tcpao"
)

// borrowed is the TCP-AO surface of one of the speaker's sockets, borrowed
// for each call: the descriptor is duplicated (pidfd_getfd), used and closed
// again, so that aokeyd never keeps the speaker's socket alive.
type borrowed struct {
	h bgp.SocketHandle
}

var _ tcpao.Socket = borrowed{}

func (b borrowed) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	return b.h.Do(func(fd int) error { return tcpao.FromFD(fd).AddKey(k, o) })
}

func (b borrowed) DelKey(d tcpao.DelKey) error {
	return b.h.Do(func(fd int) error { return tcpao.FromFD(fd).DelKey(d) })
}

func (b borrowed) Info() (info tcpao.Info, err error) {
	err = b.h.Do(func(fd int) error {
		info, err = tcpao.FromFD(fd).Info()
		return err
	})
	return info, err
}

func (b borrowed) SetInfo(c tcpao.InfoChange) error {
	return b.h.Do(func(fd int) error { return tcpao.FromFD(fd).SetInfo(c) })
}

func (b borrowed) Keys(f tcpao.KeyFilter) (keys []tcpao.KeyInfo, err error) {
	err = b.h.Do(func(fd int) error {
		keys, err = tcpao.FromFD(fd).Keys(f)
		return err
	})
	return keys, err
}

// errNoEnt is what TCP_AO_GET_KEYS/INFO answer on a socket without TCP-AO.
var errNoEnt = syscall.ENOENT
