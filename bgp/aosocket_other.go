//go:build !linux

package bgp

import (
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

// MD5Keys needs sock_diag: Linux only.
func (s aoSocket) MD5Keys() ([]tcpao.MD5Info, error) { return nil, sockets.ErrUnsupported }
