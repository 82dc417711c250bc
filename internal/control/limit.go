package control

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener serves at most max connections at once. One more is not
// left waiting in the backlog: it is read for a moment, answered 503 and
// closed, so that the client gets a clear error and the daemon spends no
// fd on it beyond that.
type limitListener struct {
	net.Listener
	max    int
	active atomic.Int64
	log    *slog.Logger

	mu     sync.Mutex
	logged time.Time
}

func newLimitListener(l net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, max: max, log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) <= int64(l.max) {
			return &limitedConn{Conn: c, l: l}, nil
		}
		l.active.Add(-1)
		l.logRefusal()
		go refuseConn(c, l.max)
	}
}

// logRefusal logs at most once a second: a flood must not flood the log.
func (l *limitListener) logRefusal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.logged) >= time.Second {
		l.logged = now
		l.log.Warn("control connection limit reached: refusing connections", "max_connections", l.max)
	}
}

// refuseConn reads the request (so that closing does not reset it before
// the client reads the answer), answers 503 and closes.
func refuseConn(c net.Conn, max int) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, MaxBody))); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, MaxBody))
	}
	body := `{"error":"too many control connections (control.max_connections is ` + strconv.Itoa(max) + `); try again","code":"unavailable"}` + "\n"
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
}

// limitedConn frees its slot when closed.
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.active.Add(-1) })
	return err
}
