package control

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Refusals of connections over the limits.
const (
	maxRefusals   = 8           // answered 503 at once; more are closed unanswered
	refuseTimeout = time.Second // for reading the request and writing the 503
)

// Accepting while the process (or the system) is out of descriptors.
const (
	acceptBackoffMin  = 5 * time.Millisecond
	acceptBackoffMax  = 100 * time.Millisecond // so a freed descriptor serves an admin at once
	exhaustedLogEvery = time.Minute
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
//
// While accept fails for want of descriptors or memory, Accept retries
// with a backoff from acceptBackoffMin doubling to acceptBackoffMax, logs
// once when that starts (again every exhaustedLogEvery while it lasts) and
// once when it ends, and returns at once when the listener is closed.
type limitListener struct {
	net.Listener
	admit            func(net.Conn) (credResult, bool) // its credentials, and whether it is an admin's
	shared, reserved int
	log              *slog.Logger
	refusing         chan struct{} // one token per refusal being answered
	done             chan struct{} // closed by Close
	closeOnce        sync.Once

	mu                 sync.Mutex
	nShared, nReserved int       // slots taken
	logged             time.Time // last refusal log line
}

func newLimitListener(l net.Listener, admit func(net.Conn) (credResult, bool), shared, reserved int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, admit: admit, shared: shared, reserved: reserved, log: log,
		refusing: make(chan struct{}, maxRefusals), done: make(chan struct{})}
}

// Close closes the listener and ends a backoff in Accept.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *limitListener) Accept() (net.Conn, error) {
	var out outOfResources
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !exhausted(err) {
				return nil, err
			}
			if !out.wait(l, err) {
				return nil, net.ErrClosed
			}
			continue
		}
		out.end(l)
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

// exhausted tells whether accept failed for want of descriptors (EMFILE,
// ENFILE) or kernel memory (ENOBUFS, ENOMEM): the listener is fine and a
// later accept may succeed.
func exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// outOfResources is one Accept's spell of exhausted accepts.
type outOfResources struct {
	since, logged time.Time
	failed        int
	delay         time.Duration
}

// wait logs the spell (when it starts, then every exhaustedLogEvery) and
// sleeps the next backoff delay; false when l is closed meanwhile.
func (o *outOfResources) wait(l *limitListener, err error) bool {
	now := time.Now()
	if o.failed == 0 {
		o.since = now
	}
	o.failed++
	if o.logged.IsZero() || now.Sub(o.logged) >= exhaustedLogEvery {
		attrs := []any{"err", err, "retry_every", acceptBackoffMax}
		if !o.logged.IsZero() {
			attrs = append(attrs, "for", now.Sub(o.since))
		}
		o.logged = now
		l.log.Warn("control socket: cannot accept connections, out of descriptors or memory; retrying", attrs...)
	}
	o.delay = min(max(2*o.delay, acceptBackoffMin), acceptBackoffMax)
	t := time.NewTimer(o.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// end logs the end of a spell, if there was one, and resets o.
func (o *outOfResources) end(l *limitListener) {
	if o.failed > 0 {
		l.log.Info("control socket: accepting connections again", "after", time.Since(o.since), "failed_accepts", o.failed)
	}
	*o = outOfResources{}
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
