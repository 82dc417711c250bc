package control

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// chanListener hands net.Pipe server ends to Serve: inside a synctest
// bubble the pipes' deadlines run on the fake clock.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
	open  atomic.Int64 // dialAs's server ends not closed yet
}

func newChanListener() *chanListener {
	return &chanListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

func (l *chanListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

func rootCred(net.Conn) (Cred, error) { return Cred{PID: 1, UID: 0, GID: 0}, nil }

// A client that trickles its request, or sits idle, is dropped after the
// read or idle timeout: it cannot hold a connection (and an fd) for ever.
func TestSlowClientDropped(t *testing.T) {
	const readTO, idleTO, trickle = 5 * time.Second, 7 * time.Second, 3 * time.Second
	tests := []struct {
		name    string
		head    string // sent at once
		trickle string // then one byte every 3s
		want    time.Duration
	}{
		{name: "silent", want: readTO},
		{name: "trickled headers", trickle: "GET /v1/status HTTP/1.1\r\nHost: aokeyd\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa\r\n\r\n", want: readTO},
		{name: "trickled body", head: "POST /v1/revoke HTTP/1.1\r\nHost: aokeyd\r\nContent-Length: 200\r\n\r\n",
			trickle: strings.Repeat("x", 200), want: readTO},
		{name: "idle after a request", head: "GET /v1/health HTTP/1.1\r\nHost: aokeyd\r\n\r\n", want: idleTO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newChanListener()
				s := NewServer(ServerOptions{Backend: &fakeBackend{}, ReadTimeout: readTO, IdleTimeout: idleTO, WriteTimeout: readTO})
				s.credOf = rootCred
				done := make(chan error, 1)
				go func() { done <- s.Serve(l) }()
				c := l.dial()
				start := time.Now()
				// A backstop: the test fails rather than hangs when the
				// server never drops the client.
				_ = c.SetReadDeadline(start.Add(10 * time.Minute))
				closed := make(chan time.Duration, 1)
				go func() {
					_, _ = io.Copy(io.Discard, c)
					closed <- time.Since(start)
				}()
				stop, wrote := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(wrote)
					if _, err := io.WriteString(c, tt.head); err != nil {
						return
					}
					for i := range len(tt.trickle) {
						select {
						case <-stop:
							return
						case <-time.After(trickle):
						}
						if _, err := io.WriteString(c, tt.trickle[i:i+1]); err != nil {
							return
						}
					}
				}()
				got := <-closed
				close(stop)
				<-wrote
				if got < tt.want || got > tt.want+trickle {
					t.Errorf("connection dropped after %v, want within [%v, %v]", got, tt.want, tt.want+trickle)
				}
				c.Close()
				_ = s.Shutdown(context.Background())
				l.Close()
				<-done
			})
		})
	}
}

// At most MaxConns connections of non-admins are served at once; one more
// is answered 503 and closed, and a freed slot serves again. In a synctest bubble over
// in-memory connections: a server that never answered would leave every
// goroutine blocked, which fails the test, and synctest.Wait is the point
// at which the server has seen a closed connection.
func TestConnectionCap(t *testing.T) { synctest.Test(t, testConnectionCap) }

func testConnectionCap(t *testing.T) {
	var logs testkit.SyncBuffer
	l := newChanListener()
	s := NewServer(ServerOptions{Backend: &fakeBackend{}, MaxConns: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		AllowGID: 4242, HaveGID: true})
	s.credOf = func(net.Conn) (Cred, error) { return Cred{PID: 501, UID: 4005, GID: 4242}, nil }
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() {
		_ = s.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c := &Client{socket: "pipe", hc: &http.Client{Transport: &http.Transport{
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return l.dial(), nil },
		DisableKeepAlives: true,
	}}}
	var held []net.Conn
	for range 3 {
		h := l.dial()
		defer h.Close()
		held = append(held, h)
	}
	// The held connections were accepted first: this one is over the cap.
	extra := l.dial()
	defer extra.Close()
	if _, err := io.WriteString(extra, "GET /v1/health HTTP/1.1\r\nHost: aokeyd\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
	if err != nil {
		t.Fatalf("over the cap: %v, want a 503 answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "too many") {
		t.Errorf("over the cap: %d %s, want 503 naming the limit", resp.StatusCode, b)
	}
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the connection over the cap stays open: read %v", err)
	}
	if !strings.Contains(logs.String(), "control connection limit") {
		t.Errorf("no log line about the limit:\n%s", logs.String())
	}
	// What aoctl reports then.
	if _, err := c.Health(context.Background()); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "too many control connections") {
		t.Errorf("client over the cap: %v, want the daemon's reason", err)
	}
	held[0].Close()
	synctest.Wait() // the server has read EOF on it and freed its slot
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatalf("a freed slot does not serve again: %v", err)
	}
}

// credPipe is the server end of an in-memory connection with the
// credentials SO_PEERCRED and SO_PEERGROUPS would report for its peer. It
// counts in open while the server has not closed it: the descriptor a
// socket would cost.
type credPipe struct {
	net.Conn
	cred Cred
	open *atomic.Int64
	once sync.Once
}

func (p *credPipe) Close() error {
	p.once.Do(func() { p.open.Add(-1) })
	return p.Conn.Close()
}

// pipeCred is Server.credOf for connections from dialAs.
func pipeCred(c net.Conn) (Cred, error) {
	if p, ok := c.(*credPipe); ok {
		return p.cred, nil
	}
	return Cred{}, errors.New("not a credPipe")
}

// dialAs connects as a process with cred.
func (l *chanListener) dialAs(cred Cred) net.Conn {
	c, s := net.Pipe()
	l.open.Add(1)
	select {
	case l.conns <- &credPipe{Conn: s, cred: cred, open: &l.open}:
	case <-l.done: // closed: the connection is refused
		l.open.Add(-1)
		s.Close()
		c.Close()
	}
	return c
}

// clientAs is a Client whose every connection presents cred.
func (l *chanListener) clientAs(cred Cred) *Client {
	return &Client{socket: "pipe", hc: &http.Client{Transport: &http.Transport{
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return l.dialAs(cred), nil },
		DisableKeepAlives: true,
	}}}
}

// A reader holding every connection a non-admin may have does not keep an
// admin out: the admin's revoke is served at once. The role is read from
// the connection's credentials at accept, before a slot is taken, and
// admins have slots of their own.
func TestAdminSlotsReserved(t *testing.T) {
	const readGID, adminGID, maxConns = 4242, 4343, 3
	reader := Cred{PID: 501, UID: 4005, GID: readGID}
	tests := []struct {
		name  string
		admin Cred
	}{
		{"root", Cred{PID: 1}},
		{"admin group", Cred{PID: 503, UID: 4007, GID: 100, Groups: []uint32{readGID, adminGID}}},
		{"daemon's uid", Cred{PID: 504, UID: 999, GID: 999}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newChanListener()
				fb := &fakeBackend{}
				s := NewServer(ServerOptions{Backend: fb, MaxConns: maxConns, OwnUID: 999,
					AllowGID: readGID, HaveGID: true, AdminGID: adminGID, HaveAdminGID: true})
				s.credOf = pipeCred
				done := make(chan error, 1)
				go func() { done <- s.Serve(l) }()
				defer func() {
					_ = s.Shutdown(context.Background())
					if err := <-done; err != nil {
						t.Errorf("Serve: %v", err)
					}
				}()
				// The reader holds every shared slot with idle connections...
				for range maxConns {
					h := l.dialAs(reader)
					defer h.Close()
				}
				// ... and is refused one more,
				if _, err := l.clientAs(reader).Status(context.Background(), ""); !errors.Is(err, ErrServer) {
					t.Errorf("reader over the cap: %v, want a 503", err)
				}
				// but the admin's revoke goes through at once.
				start := time.Now()
				if _, err := l.clientAs(tt.admin).Revoke(context.Background(), RevokeRequest{Chain: "core", Key: "a"}); err != nil {
					t.Fatalf("admin revoke with the shared slots held: %v", err)
				}
				if d := time.Since(start); d > time.Second || len(fb.revokes) != 1 {
					t.Errorf("revoke took %v, backend saw %d revokes", d, len(fb.revokes))
				}
				// Admins are bounded too: past the reserved slots, 503.
				synctest.Wait() // the server has closed the revoke's connection
				for range DefaultAdminConns {
					h := l.dialAs(tt.admin)
					defer h.Close()
				}
				if _, err := l.clientAs(tt.admin).Health(context.Background()); !errors.Is(err, ErrServer) ||
					!strings.Contains(err.Error(), "admin_connections") {
					t.Errorf("admin past the reserved slots: %v, want a 503 naming control.admin_connections", err)
				}
			})
		})
	}
}

// A connect flood over the cap costs the daemon nothing lasting: at most a
// few refusals are answered at a time (each holds a descriptor and a
// goroutine for up to a second), the rest are closed at once, and once the
// flood stops the daemon holds only the connections it serves.
func TestRefusedConnectionsBounded(t *testing.T) { synctest.Test(t, testRefusedConnectionsBounded) }

func testRefusedConnectionsBounded(t *testing.T) {
	const readGID, maxConns, flood = 4242, 3, 200
	reader := Cred{PID: 501, UID: 4005, GID: readGID}
	l := newChanListener()
	s := NewServer(ServerOptions{Backend: &fakeBackend{}, MaxConns: maxConns, AllowGID: readGID, HaveGID: true})
	s.credOf = pipeCred
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	defer func() {
		_ = s.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range maxConns {
		held = append(held, l.dialAs(reader))
	}
	synctest.Wait()
	goroutines := runtime.NumGoroutine()
	// The flood: connections that send nothing and stay open.
	for range flood {
		held = append(held, l.dialAs(reader))
	}
	synctest.Wait()
	// Bound: the slots, plus the refusals answered at once.
	bound := int64(maxConns + DefaultAdminConns + maxRefusals)
	if n := l.open.Load(); n > bound {
		t.Errorf("during a flood of %d: the server holds %d connections, want at most %d", flood, n, bound)
	}
	if n := runtime.NumGoroutine() - goroutines; n > maxRefusals+4 {
		t.Errorf("during a flood of %d: %d more goroutines, want at most %d", flood, n, maxRefusals+4)
	}
	time.Sleep(refuseTimeout)
	synctest.Wait()
	if n := l.open.Load(); n != maxConns {
		t.Errorf("%v after the flood: the server holds %d connections, want the %d it serves", refuseTimeout, n, maxConns)
	}
}
