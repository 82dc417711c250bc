package vaulttest

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"
)

// pipeHost is the host name of an in-memory server's URL; DialContext
// ignores the address it is given.
const pipeHost = "vaulttest.invalid"

// pipeListener hands the server ends of net.Pipe connections to Serve.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return pipeHost }

// dial connects to the listener, or fails as a TCP connect to a closed
// port does (connection refused).
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr{}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// DialContext connects to an InMemory server (http.Transport.DialContext);
// while the server is stopped it fails with connection refused.
func (s *Server) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	s.mu.Lock()
	ln, ok := s.ln.(*pipeListener)
	s.mu.Unlock()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr{}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return ln.dial(ctx)
}
