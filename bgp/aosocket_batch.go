package bgp

import "github.com/aokeyd/aokeyd/tcpao"

// BatchKeys runs f with the socket's descriptor borrowed once (one
// pidfd_getfd and its checks) for every call f makes, where each call on
// the socket itself borrows it anew: a read and a delete, or a plan's
// operations (rotator.Apply), cost one borrow. The Socket f gets must not
// be used after f returns.
func (s aoSocket) BatchKeys(f func(tcpao.Socket) error) error {
	return s.h.Do(func(fd int) error { return tcpao.Batch(tcpao.FromFD(fd), f) })
}
