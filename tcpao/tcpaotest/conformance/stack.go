package conformance

import (
	"fmt"
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// ErrTimeout is what Stack.Connect and Stack.Exchange return when the
// segments are dropped and nothing arrives in time.
var ErrTimeout = tcpaotest.ErrTimeout

// Stack makes and connects TCP sockets. Sockets are tcpao.Socket values of
// the Stack's own making; passing another Stack's sockets is an error.
type Stack interface {
	// Socket returns a closed (TCP_CLOSE) socket bound to local with an
	// ephemeral port; its family is local's.
	Socket(local netip.Addr) (tcpao.Socket, error)
	// Listen is listen(2) on a socket from Socket.
	Listen(s tcpao.Socket) error
	// Connect connects s to the listener l and returns the accepted end. A
	// connect(2) error is returned as such (errors.Is with the errno); a
	// handshake that does not complete yields ErrTimeout, and s stays open.
	Connect(s, l tcpao.Socket) (tcpao.Socket, error)
	// ConnectTo is Connect to the listener l at the address dst (l bound
	// to the wildcard address: dst is one of the host's, and may carry
	// an IPv6 zone).
	ConnectTo(s, l tcpao.Socket, dst netip.Addr) (tcpao.Socket, error)
	// Links are two links (interfaces) that each hold the link-local
	// addresses LinkLocalA and LinkLocalB: the same two addresses on
	// both, as two links' neighbours may have.
	Links() ([2]Link, error)
	// Exchange sends n small messages from a to b, each answered by b and
	// the answer acknowledged by a at once; it returns ErrTimeout when a
	// message does not arrive or an answer stays unacknowledged.
	Exchange(a, b tcpao.Socket, n int) error
	// OptMemMax is net.core.optmem_max.
	OptMemMax() (int, error)
	// Close closes every socket the Stack made.
	Close() error
}

// Link is one interface of the host: its name (an IPv6 zone) and index.
type Link struct {
	Name  string
	Index int
}

// The link-local addresses every Link holds (Stack.Links).
var (
	LinkLocalA = netip.MustParseAddr("fe80::a")
	LinkLocalB = netip.MustParseAddr("fe80::b")
)

// MemStack is the in-memory Stack over a tcpaotest.Net.
type MemStack struct {
	Net *tcpaotest.Net
}

// NewMemStack returns a MemStack over a fresh tcpaotest.Net.
func NewMemStack(opts ...tcpaotest.Option) *MemStack {
	return &MemStack{Net: tcpaotest.NewNet(opts...)}
}

func memSock(s tcpao.Socket) (*tcpaotest.Sock, error) {
	m, ok := s.(*tcpaotest.Sock)
	if !ok {
		return nil, fmt.Errorf("conformance: %T is not a tcpaotest socket", s)
	}
	return m, nil
}

func (m *MemStack) Socket(local netip.Addr) (tcpao.Socket, error) { return m.Net.Socket(local) }

func (m *MemStack) Listen(s tcpao.Socket) error {
	ms, err := memSock(s)
	if err != nil {
		return err
	}
	return ms.Listen()
}

func (m *MemStack) Connect(s, l tcpao.Socket) (tcpao.Socket, error) {
	return m.ConnectTo(s, l, netip.Addr{})
}

// ConnectTo connects s to l at dst (invalid: at l's own address).
func (m *MemStack) ConnectTo(s, l tcpao.Socket, dst netip.Addr) (tcpao.Socket, error) {
	ms, err := memSock(s)
	if err != nil {
		return nil, err
	}
	ml, err := memSock(l)
	if err != nil {
		return nil, err
	}
	var a *tcpaotest.Sock
	if dst.IsValid() {
		a, err = m.Net.ConnectTo(ms, ml, dst)
	} else {
		a, err = m.Net.Connect(ms, ml)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Links are two links the in-memory kernel knows only by name: it has no
// interfaces, and an ifindex that is not one of its VRFs' is refused as
// the kernel refuses one that is not an L3 master device.
func (m *MemStack) Links() ([2]Link, error) {
	return [2]Link{{Name: "ll0", Index: 1000}, {Name: "ll1", Index: 1001}}, nil
}

func (m *MemStack) Exchange(a, b tcpao.Socket, n int) error {
	ma, err := memSock(a)
	if err != nil {
		return err
	}
	mb, err := memSock(b)
	if err != nil {
		return err
	}
	return m.Net.Exchange(ma, mb, n)
}

func (m *MemStack) OptMemMax() (int, error) { return m.Net.OptMemMax(), nil }

func (m *MemStack) Close() error { return nil }

// CloseSocket is close(2) of one socket.
func (m *MemStack) CloseSocket(s tcpao.Socket) error {
	ms, err := memSock(s)
	if err != nil {
		return err
	}
	return ms.Close()
}
