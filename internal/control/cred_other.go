//go:build !linux

package control

import (
	"errors"
	"net"
)

func peerCred(net.Conn) (Cred, error) {
	return Cred{}, errors.New("SO_PEERCRED is Linux only")
}
