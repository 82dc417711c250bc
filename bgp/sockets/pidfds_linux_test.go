//go:build linux

package sockets

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// A process's pidfd is opened once for all borrows from it and closed
// once the process exited: borrows while it runs add one descriptor
// (the cached pidfd) to this process, whatever their number; the first
// borrow after its exit is stale and leaves no descriptor behind; another
// process's first borrow sweeps an exited one that nobody asked again.
func TestPidfdOncePerProcess(t *testing.T) {
	l, err := plainListen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no IPv4 loopback: %v", err)
	}
	defer l.Close()
	lf, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(lf.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	child := func() *exec.Cmd {
		// The child holds the listener as its fd 3.
		c := exec.Command("sleep", "60")
		c.ExtraFiles = []*os.File{lf}
		if err := c.Start(); err != nil {
			t.Skipf("no sleep to run: %v", err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _, _ = c.Process.Wait() })
		return c
	}
	borrow := func(c *exec.Cmd) error {
		return WithSocket(Ref{PID: c.Process.Pid, FD: 3, Inode: st.Ino, Listening: true}, func(fd int) error {
			_, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
			return err
		})
	}
	// Taken after the start: os.Process holds a pidfd of its own.
	a := child()
	base, cached := openFDs(t), cachedPidfds()
	for range 5 {
		if err := borrow(a); err != nil {
			if errors.Is(err, unix.EPERM) {
				t.Skipf("pidfd_getfd not permitted here: %v", err)
			}
			t.Fatal(err)
		}
	}
	if got := openFDs(t) - base; got != 1 {
		t.Errorf("5 borrows from one process left %d more descriptors open, want 1 (its pidfd)", got)
	}
	if got := cachedPidfds() - cached; got != 1 {
		t.Errorf("%d more cached pidfds, want 1", got)
	}
	_ = a.Process.Kill()
	_, _ = a.Process.Wait() // closes os.Process's pidfd
	base--
	if err := borrow(a); !errors.Is(err, ErrStale) {
		t.Errorf("a borrow from an exited process: %v, want ErrStale", err)
	}
	if got := openFDs(t) - base; got != 0 {
		t.Errorf("after the process exited and was borrowed from, %d more descriptors open, want 0", got)
	}

	// An exited process nobody borrows from again is swept when another
	// process's pidfd is opened.
	b, c := child(), child()
	base = openFDs(t)
	if err := borrow(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Process.Kill()
	_, _ = b.Process.Wait()
	base--
	if err := borrow(c); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t) - base; got != 1 {
		t.Errorf("one live and one exited process borrowed from: %d more descriptors open, want 1 (the live one's pidfd)", got)
	}
}
