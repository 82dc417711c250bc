package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ListenOptions configure Listen.
type ListenOptions struct {
	// Mode is the socket file's mode (0660 when zero).
	Mode fs.FileMode
	// GID, when HaveGID, becomes the socket's group; the owner is the
	// daemon's uid (root).
	GID     int
	HaveGID bool
}

// ErrInUse is returned by Listen when another process serves the socket.
var ErrInUse = errors.New("control socket in use by a running daemon")

// Listen creates the control socket at path: it creates the directory
// (0755) if needed, removes a stale socket left by a daemon that died
// (refusing if one still answers, or if path is not a socket), listens,
// then sets the mode and group. Between listen and chmod the socket has
// the umask's mode; the SO_PEERCRED check covers that window.
func Listen(path string, o ListenOptions) (*net.UnixListener, error) {
	if o.Mode == 0 {
		o.Mode = 0o660
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control: socket directory: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control: listen %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	fail := func(err error) (*net.UnixListener, error) {
		l.Close()
		return nil, err
	}
	if err := os.Chmod(path, o.Mode); err != nil {
		return fail(fmt.Errorf("control: chmod %s: %w", path, err))
	}
	if o.HaveGID {
		if err := os.Lchown(path, os.Getuid(), o.GID); err != nil {
			return fail(fmt.Errorf("control: chown %s to gid %d: %w", path, o.GID, err))
		}
	}
	return l, nil
}

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control: %s: %w", path, ErrInUse)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("control: remove stale socket: %w", err)
	}
	return nil
}
