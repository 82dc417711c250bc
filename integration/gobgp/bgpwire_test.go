package gobgp

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// openMsg is a BGP OPEN (RFC 4271 section 4.2) with the multiprotocol
// IPv4-unicast and 4-octet-AS capabilities.
func openMsg(as uint16, hold uint16, id netip.Addr) []byte {
	caps := []byte{
		2, 6, 1, 4, 0, 1, 0, 1, // capability: MP, AFI 1, SAFI 1
		2, 6, 65, 4, 0, 0, byte(as >> 8), byte(as), // capability: 4-octet AS
	}
	body := []byte{4, byte(as >> 8), byte(as), byte(hold >> 8), byte(hold)}
	v4 := id.As4()
	body = append(body, v4[:]...)
	body = append(body, byte(len(caps)))
	body = append(body, caps...)
	return bgpMsg(1, body)
}

func keepaliveMsg() []byte { return bgpMsg(4, nil) }

func bgpMsg(typ byte, body []byte) []byte {
	b := make([]byte, 19, 19+len(body))
	for i := range 16 {
		b[i] = 0xff
	}
	binary.BigEndian.PutUint16(b[16:], uint16(19+len(body)))
	b[18] = typ
	return append(b, body...)
}

// readMsg reads one BGP message and returns its type.
func readMsg(c net.Conn) (byte, error) {
	h := make([]byte, 19)
	if _, err := io.ReadFull(c, h); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(h[16:]))
	if n < 19 || n > 4096 {
		return 0, fmt.Errorf("bgp message length %d", n)
	}
	if _, err := io.ReadFull(c, make([]byte, n-19)); err != nil {
		return 0, err
	}
	return h[18], nil
}

// bgpHandshake plays the connecting side up to Established: OPEN both
// ways, then KEEPALIVE both ways. It then answers keepalives until stop.
func bgpHandshake(c net.Conn, as uint16, id netip.Addr, stop <-chan struct{}) error {
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(openMsg(as, 90, id)); err != nil {
		return err
	}
	sawOpen, sawKA := false, false
	for !sawOpen || !sawKA {
		t, err := readMsg(c)
		if err != nil {
			return fmt.Errorf("waiting for OPEN/KEEPALIVE: %w", err)
		}
		switch t {
		case 1:
			sawOpen = true
			if _, err := c.Write(keepaliveMsg()); err != nil {
				return err
			}
		case 4:
			sawKA = sawOpen
		case 3:
			return fmt.Errorf("peer sent NOTIFICATION")
		}
	}
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, _ = c.Write(keepaliveMsg())
			}
		}
	}()
	return nil
}
