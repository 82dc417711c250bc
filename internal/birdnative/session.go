package birdnative

import (
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// readSession reads BIRD's established socket with the peer (nil, nil when
// there is none) and its keys' pkt_good against the previous pass's.
func (d *Driver) readSession(pid int, id peer.Key, record bool) ([]tcpao.KeyInfo, *session, error) {
	// The kernel is read without the lock: Status must not wait on it.
	refs, err := sockets.System{}.Connections(pid, id.Addr)
	var keys []tcpao.KeyInfo
	if err == nil && len(refs) > 0 {
		err = sockets.System{}.With(refs[0], func(fd int) error {
			var err error
			keys, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			return err
		})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	if len(refs) == 0 {
		if record {
			delete(d.lastGood, id)
		}
		return nil, nil, nil
	}
	s := &session{good: map[ids]uint64{}, before: d.lastGood[id]}
	for _, k := range keys {
		s.good[ids{k.SendID, k.RecvID}] = k.PktGood
	}
	if s.before == nil {
		s.before = s.good // first look: nothing seen rising yet
	}
	if record {
		d.lastGood[id] = s.good
	}
	return keys, s, nil
}
