package birdnative

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// waitClean reads BIRD's listeners and its sessions with the covered
// peers until none holds key id for any of them (10 s at most), and
// returns the peers still dirty then.
func (e *Executor) waitClean(ctx context.Context, covered []peer.Key, id ids) (map[peer.Key]bool, error) {
	pid, err := e.o.PID()
	if err != nil {
		return nil, fmt.Errorf("BIRD's process: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirty, err := e.dirty(pid, covered, id)
		if err == nil && len(dirty) == 0 {
			return nil, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return dirty, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dirty are the covered peers for which a BIRD socket (a listener, or a
// session with the peer) holds id.
func (e *Executor) dirty(pid int, covered []peer.Key, id ids) (map[peer.Key]bool, error) {
	out := map[peer.Key]bool{}
	read := func(r sockets.Ref, peers []peer.Key) error {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			for _, k := range ks {
				if k.SendID != id[0] || k.RecvID != id[1] {
					continue
				}
				for _, p := range peers {
					if k.Peer.Contains(p.Addr) {
						out[p] = true
					}
				}
			}
			return err
		})
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the socket closed meanwhile
		}
		return err
	}
	lis, err := sockets.System{}.Listeners(pid, e.o.Port)
	if err != nil {
		return nil, err
	}
	for _, r := range lis {
		if err := read(r, covered); err != nil {
			return nil, err
		}
	}
	// Every covered peer's sessions from one sock_diag dump and one
	// search of BIRD's descriptors (sessionsOf): read peer by peer, a
	// revoke across 1,000 protocols cost a dump and a search each, every
	// round of the wait: 39.6 s and 50.9 CPU-seconds in the guest.
	conns, err := sessionsOf(pid, covered)
	if err != nil {
		return nil, err
	}
	for _, p := range covered {
		for _, r := range conns[p.Addr.Unmap()] {
			if err := read(r, []peer.Key{p}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Clean implements daemon.Executor: BIRD's listeners and its sessions
// with peers, read until none holds ref (10 s at most); the peers still
// dirty then.
func (e *Executor) Clean(ctx context.Context, peers []peer.Key, ref tcpao.KeyRef) (map[peer.Key]bool, error) {
	e.warm() // its reads hold BIRD's listeners for a moment: mend's window
	defer e.warm()
	return e.waitClean(ctx, peers, ids{ref.SendID, ref.RecvID})
}
