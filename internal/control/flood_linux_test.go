package control

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The case, on a real socket: a read-group user holds every slot
// a non-admin may have with idle connections and floods connects; root's
// revoke is served within a second, and the daemon's descriptors stay
// bounded (the flood's connections are refused at once, not held).
//
// Every connection is this process's, so the reader is told apart by its
// socket's address (abstract, bound before connect); the others get their
// real credentials: root in CI, else the daemon's own uid, both admins.
func TestReaderFloodDoesNotBlockRevoke(t *testing.T) {
	const readGID, flood = 4242, 500
	reader := Cred{PID: 501, UID: 4005, GID: readGID}
	prefix := fmt.Sprintf("@aokeyd-test-reader-%d-", os.Getpid())
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := Listen(path, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBackend{}
	s := NewServer(ServerOptions{Backend: fb, AllowGID: readGID, HaveGID: true})
	s.credOf = func(c net.Conn) (Cred, error) {
		if a := c.RemoteAddr(); a != nil && strings.HasPrefix(a.String(), prefix) {
			return reader, nil
		}
		return peerCred(c)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		_ = s.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	baseline := openFDs(t)

	var mu sync.Mutex
	var held []net.Conn // the reader's connections: each costs this process one fd
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	n := 0
	dialReader := func() (net.Conn, error) {
		n++
		return net.DialUnix("unix", &net.UnixAddr{Name: fmt.Sprint(prefix, n), Net: "unix"}, &net.UnixAddr{Name: path, Net: "unix"})
	}
	// The reader fills every shared slot with connections left idle
	// after a request.
	for range DefaultMaxConns {
		c, err := dialReader()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: aokeyd\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("reader's request: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	// Then floods connects, holding each connection open, while root
	// revokes.
	started, flooded := make(chan struct{}), make(chan int)
	go func() {
		failed := 0
		for i := range flood {
			if i == flood/5 {
				close(started)
			}
			c, err := dialReader()
			if err != nil { // the backlog is full: the flood goes on
				failed++
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
		flooded <- failed
	}()
	<-started
	start := time.Now()
	_, err = NewClient(path, 5*time.Second).Revoke(context.Background(), RevokeRequest{Chain: "core", Key: "a"})
	took := time.Since(start)
	failed := <-flooded
	if err != nil || took > time.Second {
		t.Errorf("root revoke during the flood: %v after %v, want served within 1s", err, took)
	}
	// The daemon's descriptors: the process's, less the reader's ends.
	mu.Lock()
	daemon := openFDs(t) - baseline - len(held)
	mu.Unlock()
	if bound := DefaultMaxConns + DefaultAdminConns + maxRefusals; daemon > bound {
		t.Errorf("after a flood of %d connects (%d failed): the daemon holds %d more descriptors, want at most %d",
			flood, failed, daemon, bound)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
