package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is in the error of Open or Read of a path that is not a
// regular file: a symlink (dangling or not), a FIFO, a device, a socket,
// a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is in the error of Read of a file larger than its cap.
var ErrTooLarge = errors.New("larger than the size cap")

// Open opens path for reading as a regular file only: a symlink is not
// followed (O_NOFOLLOW), and a FIFO, a device or a socket is opened
// without blocking (O_NONBLOCK) and refused before anything is read. A
// missing file is an error satisfying errors.Is(err, fs.ErrNotExist). The
// returned file reads blocking as usual (a regular file never blocks).
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		target, _ := os.Readlink(path)
		return nil, fmt.Errorf("a symlink (to %q), %w: it is read only as a regular file, never through a symlink", target, ErrNotRegular)
	}
	if errors.Is(err, syscall.ENXIO) { // a socket
		return nil, fmt.Errorf("a socket, %w", ErrNotRegular)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s, %w", kind(fi.Mode()), ErrNotRegular)
	}
	return f, nil
}

// Read is the content of the regular file at path (Open), refused unread
// when larger than max bytes.
func Read(path string, max int64) ([]byte, error) {
	b, _, err := ReadInfo(path, max)
	return b, err
}

// ReadInfo is Read, with the file's information from the descriptor it
// read (never another file's: a rename over path meanwhile is not seen).
func ReadInfo(path string, max int64) ([]byte, fs.FileInfo, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	tooBig := fmt.Errorf("%w: %d bytes, more than the %d this file may hold", ErrTooLarge, fi.Size(), max)
	if fi.Size() > max {
		return nil, nil, tooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > max { // it grew since the Stat
		clear(b)
		return nil, nil, fmt.Errorf("%w: it grew past %d bytes while read", ErrTooLarge, max)
	}
	return b, fi, nil
}

// kind names a file type that is not a regular file.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}
