package birdnative

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/aokeyd/aokeyd/rotator"
)

// fileIdent is an include file's identity as the kernel reports it: a
// rewrite (a new file renamed over it) is a new inode, an edit in place a
// new size or modification time.
type fileIdent struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// writtenCache remembers each include file's keys as a socket's (IDs,
// algorithms, flags and fingerprints: never a secret) by the file's
// identity, so that a pass's read of a file that has not changed is one
// lstat, not an open, a read, a parse and an HMAC a key. At a route
// server's 1,000 files the reads were most of a revoke's plan in the
// guest (syscalls cost tens of microseconds there).
type writtenCache struct {
	mu    sync.Mutex
	files map[string]cachedWritten
	reads int // files read and parsed (tests)
}

type cachedWritten struct {
	ident   fileIdent
	written rotator.Observed
}

func identOf(fi fs.FileInfo) (fileIdent, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdent{}, false
	}
	return fileIdent{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true
}

// written is path's keys as a socket's (readFile's and parseFile's rules:
// no file is none; a file that is not a regular one, too large or not in
// aokeyd's form is an error naming it), from the cache while the file is
// the one read.
func (c *writtenCache) written(path string) (rotator.Observed, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		if id, ok := identOf(fi); ok {
			c.mu.Lock()
			cw, hit := c.files[path]
			c.mu.Unlock()
			if hit && cw.ident == id {
				return cloneObserved(cw.written), nil
			}
		}
	}
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	b, id, err := readFileIdent(path)
	defer clear(b)
	if err != nil {
		return rotator.Observed{}, err
	}
	ks, err := parseFile(b)
	if err != nil {
		return rotator.Observed{}, fmt.Errorf("%s: %v", path, err)
	}
	w := writtenAsSocket(ks)
	zeroKeys(ks)
	if id != (fileIdent{}) {
		c.mu.Lock()
		if c.files == nil {
			c.files = map[string]cachedWritten{}
		}
		c.files[path] = cachedWritten{ident: id, written: cloneObserved(w)}
		c.mu.Unlock()
	}
	return w, nil
}

func cloneObserved(o rotator.Observed) rotator.Observed {
	o.Keys = append(o.Keys[:0:0], o.Keys...)
	return o
}

// readFileIdent is readFile, with the identity of the file it read (from
// the descriptor it read: never another file's); no file: nil and the
// zero identity, as is a file that changed size while read (not
// remembered).
func readFileIdent(path string) ([]byte, fileIdent, error) {
	b, fi, err := readFileInfo(path)
	if err != nil || fi == nil {
		return b, fileIdent{}, err
	}
	id, _ := identOf(fi)
	if int64(len(b)) != fi.Size() {
		id = fileIdent{}
	}
	return b, id, nil
}
