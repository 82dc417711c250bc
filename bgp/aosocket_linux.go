//go:build linux

package bgp

import (
	"fmt"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// MD5Keys reads the socket's TCP-MD5 keys through sock_diag in the
// speaker's network namespace: a listener's by its address and cookie
// (sockets.Diag.Listener), an established socket's by its addresses.
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
	so, err := d.Listener(ref.Local, ref.Cookie)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: listener %s: %w", ref, err)
	}
	return so.MD5, nil
}
