package sockets

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestUnixListenerOwner: the process listening on a unix socket's path is
// found (this test's own), a path nobody listens on is an error naming
// it, and a socket bound but not listening does not count.
func TestUnixListenerOwner(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bird.ctl")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := UnixListenerOwner(sock)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("UnixListenerOwner(%s) = %d, %v; want %d", sock, pid, err, os.Getpid())
	}
	if _, err := UnixListenerOwner(filepath.Join(dir, "none.ctl")); err == nil {
		t.Fatal("a path nobody listens on was found")
	}
	dgram := filepath.Join(dir, "dgram.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: dgram, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := UnixListenerOwner(dgram); err == nil {
		t.Fatal("a bound datagram socket (not listening) was taken for a listener")
	}
}
