package frr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"
)

// VtySocket talks to bgpd's own vty socket (bgpd.vty in FRR's run
// directory) the way vtysh does: each command is sent NUL-terminated and
// bgpd answers with its output and a trailer of three NULs and a status
// byte. No process is started per command: on the guest VM's emulated CPU
// one vtysh start (which builds its whole command tree) took longer than a
// poll interval, while a command over the socket takes milliseconds.
type VtySocket struct {
	// Path of bgpd's vty socket (default /run/frr/bgpd.vty).
	Path string
}

// DefaultVtySocket is bgpd's vty socket in FRR's default run directory.
const DefaultVtySocket = "/run/frr/bgpd.vty"

// VtySocketIn is bgpd's vty socket in dir (FRR's --vty_socket), under
// pathspace (FRR's -N) when it is not "".
func VtySocketIn(dir, pathspace string) VtySocket {
	if dir == "" {
		dir = filepath.Dir(DefaultVtySocket)
	}
	if pathspace != "" {
		dir = filepath.Join(dir, pathspace)
	}
	return VtySocket{Path: filepath.Join(dir, "bgpd.vty")}
}

// ErrCommand is wrapped when bgpd refuses or fails a command (a non-zero
// status); the error carries bgpd's message.
var ErrCommand = errors.New("bgpd refused the command")

// Vtysh implements Runner: it connects, enters enable mode (clear needs
// it) and runs command.
func (v VtySocket) Vtysh(ctx context.Context, command string) ([]byte, error) {
	path := v.Path
	if path == "" {
		path = DefaultVtySocket
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("bgpd vty %s (is bgpd running? aokeyd needs write access to FRR's run directory): %w", path, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(DefaultTimeout))
	}
	if _, err := vtyExchange(c, "enable"); err != nil {
		return nil, err
	}
	return vtyExchange(c, command)
}

// vtyExchange sends one command and reads bgpd's answer up to its trailer.
func vtyExchange(c net.Conn, command string) ([]byte, error) {
	if bytes.IndexByte([]byte(command), 0) >= 0 {
		return nil, errors.New("command contains a NUL byte")
	}
	if _, err := c.Write(append([]byte(command), 0)); err != nil {
		return nil, fmt.Errorf("bgpd vty: %w", err)
	}
	out, status, err := readAnswer(c, maxOutput)
	if err != nil {
		clear(out)
		return nil, fmt.Errorf("bgpd vty %q: %w", command, err)
	}
	if status != 0 {
		msg := string(bytes.TrimSpace(out))
		clear(out)
		return nil, fmt.Errorf("%w: %q (status %d): %s", ErrCommand, command, status, msg)
	}
	return out, nil
}

// readAnswer reads bgpd's output up to its trailer "\x00\x00\x00" STATUS
// (the output itself is text without NUL bytes). It reads at most limit
// bytes of output.
func readAnswer(r interface{ Read([]byte) (int, error) }, limit int) (out []byte, status byte, err error) {
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 32<<10)
	defer clear(chunk)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			if len(buf)+n > limit+4 {
				clear(buf)
				return nil, 0, fmt.Errorf("answer longer than %d bytes", limit)
			}
			if cap(buf)-len(buf) < n {
				grown := make([]byte, len(buf), 2*cap(buf)+n)
				copy(grown, buf)
				clear(buf) // the running configuration may hold passwords
				buf = grown
			}
			buf = append(buf, chunk[:n]...)
			if l := len(buf); l >= 4 && buf[l-4] == 0 && buf[l-3] == 0 && buf[l-2] == 0 {
				return buf[:l-4], buf[l-1], nil
			}
		}
		if err != nil {
			clear(buf)
			return nil, 0, fmt.Errorf("answer cut short: %w", err)
		}
	}
}
