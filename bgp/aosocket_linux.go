//go:build linux

package bgp

import (
	"fmt"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// MD5Keys reads the socket's TCP-MD5 keys through sock_diag in the
// speaker's network namespace: a listener's by an exact request (its
// address, matched by cookie; a dump drops a listener with more keys than
// its datagram holds), else from a dump of the listeners, an established
// socket's by its addresses.
func (s aoSocket) MD5Keys() ([]tcpao.MD5Info, error) {
	ref := s.h.Ref()
	d, err := sockets.OpenDiag(ref.PID)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	d.MD5 = true
	if !ref.Listening {
		so, err := d.Lookup(ref.Local, ref.Remote)
		if err != nil {
			return nil, err
		}
		return so.MD5, nil
	}
	if so, err := d.Listener(ref.Local, ref.Cookie); err == nil {
		return so.MD5, nil // the kernel sized the answer to its keys
	}
	ls, err := d.Listeners()
	if err != nil {
		return nil, err
	}
	for _, so := range ls {
		if so.Cookie == ref.Cookie {
			return so.MD5, nil
		}
	}
	return nil, fmt.Errorf("sock_diag: listener %s: %w", ref, sockets.ErrNotFound)
}
