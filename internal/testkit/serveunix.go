package testkit

import (
	"net"
	"testing"
)

// ServeUnix listens on the unix socket path and runs serve for each
// connection on a goroutine of its own, closing the connection when
// serve returns; the listener closes when the test ends. It is the
// stand-in of a speaker's control socket (BIRD's, FRR's vty) in tests.
func ServeUnix(t testing.TB, path string, serve func(c net.Conn)) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
}
