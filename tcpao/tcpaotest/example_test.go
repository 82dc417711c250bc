package tcpaotest_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

func Example() {
	mkt := func(peer string, send, recv uint8) tcpao.Key {
		return tcpao.Key{
			KeyRef:    tcpao.KeyRef{Peer: netip.MustParsePrefix(peer), SendID: send, RecvID: recv},
			Algorithm: tcpao.HMACSHA1,
			Secret:    tcpao.NewSecret([]byte("example")),
		}
	}
	n := tcpaotest.NewNet()
	l, _ := n.Socket(netip.MustParseAddr("127.0.0.1"))
	_ = l.AddKey(mkt("127.0.0.2/32", 2, 1), tcpao.AddOptions{})
	_ = l.Listen()

	c, _ := n.Socket(netip.MustParseAddr("127.0.0.2"))
	_ = c.AddKey(mkt("127.0.0.1/32", 1, 2), tcpao.AddOptions{})
	a, err := n.Connect(c, l)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exchange:", n.Exchange(c, a, 3))
	in, _ := a.Info()
	fmt.Println("accepted current:", in.CurrentKey, "rnext:", in.RNextKey)

	unsigned, _ := n.Socket(netip.MustParseAddr("127.0.0.2"))
	_, err = n.Connect(unsigned, l)
	fmt.Println("unsigned connect times out:", errors.Is(err, tcpaotest.ErrTimeout))
	// Output:
	// exchange: <nil>
	// accepted current: 2 rnext: 1
	// unsigned connect times out: true
}
