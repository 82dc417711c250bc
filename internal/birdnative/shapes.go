package birdnative

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// BIRD's parser takes or refuses a key file by its form: the key lines'
// IDs, algorithms, flags and the secrets' lengths, never the secrets'
// digits. A file's shape is its text with every secret's hex digits
// replaced by zeros (so a shape holds no secret), and the executor checks
// one file of each shape it has not seen BIRD take: a route server's
// thousand members, whose chains share IDs and algorithms, are a handful
// of shapes, and a revoke after a roll rewrites files of shapes checked
// at the roll (`bird -p` over 1,000 protocols took 1.8 s in the guest).
// BIRD still reads every real file at the configure; one it refused there
// would fail the configure and be put back, as any refusal is.

// maxShapes bounds the shapes remembered; past it the memory starts over.
const maxShapes = 4096

// shapeChecker remembers the shapes one bird binary took (Run's own).
type shapeChecker struct {
	binary string // the binary's identity (binaryID) the shapes were taken by
	taken  map[[sha256.Size]byte]bool
	// runs counts the `bird -p` runs (tests).
	runs int
}

var secretHex = []byte("secret hex:")

// shapeOf is b's shape: every secret's hex digits replaced by '0'.
func shapeOf(b []byte) [sha256.Size]byte {
	h := sha256.New()
	zeros := bytes.Repeat([]byte{'0'}, 64)
	for {
		i := bytes.Index(b, secretHex)
		if i < 0 {
			h.Write(b)
			break
		}
		i += len(secretHex)
		h.Write(b[:i])
		b = b[i:]
		n := 0
		for n < len(b) && isHex(b[n]) {
			n++
		}
		for w := n; w > 0; w -= min(w, len(zeros)) {
			h.Write(zeros[:min(w, len(zeros))])
		}
		b = b[n:]
	}
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// binaryID names the bird binary at name (a path, or a name found in
// PATH) as it is now: its path, inode, size and modification time. An
// upgraded BIRD is another binary, whose taken shapes start empty.
func binaryID(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%s %d %d %d", p, ino, fi.Size(), fi.ModTime().UnixNano())
}

// validate checks files with BIRD's parser (parseCheck), one file of each
// shape not yet taken by this binary, in one run; a refused run is checked
// shape by shape to name the refused ones (validateEach). It returns one
// error per file (nil: taken).
func (s *shapeChecker) validate(ctx context.Context, birdBin string, files [][]byte) []error {
	errs := make([]error, len(files))
	id := binaryID(birdBin)
	if id != s.binary || len(s.taken) > maxShapes {
		s.binary, s.taken = id, map[[sha256.Size]byte]bool{}
	}
	first := map[[sha256.Size]byte]int{} // an unchecked shape's first file
	shapes := make([][sha256.Size]byte, len(files))
	var reps [][]byte
	var repShapes [][sha256.Size]byte
	for i, f := range files {
		shapes[i] = shapeOf(f)
		if s.taken[shapes[i]] {
			continue
		}
		if _, ok := first[shapes[i]]; !ok {
			first[shapes[i]] = i
			reps = append(reps, f)
			repShapes = append(repShapes, shapes[i])
		}
	}
	if len(reps) == 0 {
		return errs
	}
	s.runs++
	repErrs := validateEach(ctx, birdBin, reps)
	refused := map[[sha256.Size]byte]error{}
	for i, err := range repErrs {
		if err != nil {
			refused[repShapes[i]] = err
		} else if id != "" { // an unknown binary's shapes are not remembered
			s.taken[repShapes[i]] = true
		}
	}
	for i := range files {
		errs[i] = refused[shapes[i]]
	}
	return errs
}
