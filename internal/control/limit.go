package control

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Refusals of connections over the limits.
const (
	maxRefusals   = 8           // answered 503 at once; more are closed unanswered
	refuseTimeout = time.Second // for reading the request and writing the 503
)

// limitListener admits connections by role. Invariants:
//   - a connection's peer credentials, and so its role, are read when it
//     is accepted, before it takes a slot;
//   - at most shared connections of any role are served at once, and at
//     most reserved more that only admins may take: however many
//     connections a non-admin holds, an admin finds a slot unless admins
//     themselves hold the reserved ones;
//   - a served connection holds exactly one slot and gives it back once,
//     when it is closed.
//
// A connection over its limit is not left waiting in the backlog. While
// fewer than maxRefusals are being refused, it is read for at most
// refuseTimeout, answered 503 and closed, so that the client gets a clear
// error; beyond that it is closed at once. A flood of connections thus
// costs at most maxRefusals descriptors and goroutines, for at most
// refuseTimeout after it stops.
type limitListener struct {
	net.Listener
	admit            func(net.Conn) (credResult, bool) // its credentials, and whether it is an admin's
	shared, reserved int
	log              *slog.Logger
	refusing         chan struct{} // one token per refusal being answered

	mu                 sync.Mutex
	nShared, nReserved int       // slots taken
	logged             time.Time // last refusal log line
}

func newLimitListener(l net.Listener, admit func(net.Conn) (credResult, bool), shared, reserved int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, admit: admit, shared: shared, reserved: reserved, log: log,
		refusing: make(chan struct{}, maxRefusals)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, admin := l.admit(c)
		if lc := l.take(c, cred, admin); lc != nil {
			return lc, nil
		}
		l.logRefusal(admin)
		select {
		case l.refusing <- struct{}{}:
			go func() {
				defer func() { <-l.refusing }()
				refuseConn(c, l.shared, l.reserved, admin)
			}()
		default:
			c.Close()
		}
	}
}

// take gives c a slot: a shared one, or for an admin a reserved one when
// none is free; nil when there is none.
func (l *limitListener) take(c net.Conn, cred credResult, admin bool) *limitedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.nShared < l.shared:
		l.nShared++
		return &limitedConn{Conn: c, l: l, cred: cred}
	case admin && l.nReserved < l.reserved:
		l.nReserved++
		return &limitedConn{Conn: c, l: l, cred: cred, reserved: true}
	}
	return nil
}

func (l *limitListener) release(reserved bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if reserved {
		l.nReserved--
	} else {
		l.nShared--
	}
}

// logRefusal logs at most once a second: a flood must not flood the log.
func (l *limitListener) logRefusal(admin bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.logged) >= time.Second {
		l.logged = now
		l.log.Warn("control connection limit reached: refusing connections (answered 503, or closed at once in a flood)",
			"max_connections", l.shared, "admin_connections", l.reserved, "admin", admin)
	}
}

// refuseConn reads the request (so that closing does not reset it before
// the client reads the answer), answers 503 and closes.
func refuseConn(c net.Conn, shared, reserved int, admin bool) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	if req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, MaxBody))); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, MaxBody))
	}
	limit := "control.max_connections is " + strconv.Itoa(shared)
	if admin {
		limit += ", and control.admin_connections " + strconv.Itoa(reserved) + " more for admins"
	}
	body := `{"error":"too many control connections (` + limit + `); try again","code":"unavailable"}` + "\n"
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// limitedConn is a served connection: it carries the credentials read at
// accept and frees its slot when closed.
type limitedConn struct {
	net.Conn
	l        *limitListener
	cred     credResult
	reserved bool // holds a reserved (admin) slot, not a shared one
	once     sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.reserved) })
	return err
}
