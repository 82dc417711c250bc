package tcpao

import (
	"bytes"
	"runtime"
	"testing"
)

// TestSharedSecret: Shared hands out one copy per material, which Zero
// leaves as it is; a clone of the same material is still its owner's to
// zero, a zeroed secret gets no shared copy of what it held, and another
// material gets its own copy.
func TestSharedSecret(t *testing.T) {
	mat := []byte("shared-secret-test-material")
	a, b := NewSecret(mat), NewSecret(mat)
	defer a.Zero()
	defer b.Zero()
	sa, sb := a.Shared(), b.Shared()
	if &sa.Bytes()[0] != &sb.Bytes()[0] {
		t.Fatal("two secrets of the same material got two copies")
	}
	if &sa.Bytes()[0] == &a.Bytes()[0] || !bytes.Equal(sa.Bytes(), mat) || sa.Fingerprint() != a.Fingerprint() {
		t.Fatal("the shared copy is not a copy of the material")
	}
	sb.Zero()
	if !bytes.Equal(sa.Bytes(), mat) {
		t.Fatal("Zero wiped a shared copy another holder uses")
	}
	c := sa.Clone()
	c.Zero()
	if !bytes.Equal(c.Bytes(), make([]byte, len(mat))) {
		t.Fatal("Zero left a clone of a shared copy as it was")
	}
	if !bytes.Equal(sa.Bytes(), mat) {
		t.Fatal("zeroing a clone wiped the shared copy")
	}
	z := a.Clone()
	z.Zero() // keeps its fingerprint
	if sz := z.Shared(); &sz.Bytes()[0] == &sa.Bytes()[0] || !bytes.Equal(sz.Bytes(), make([]byte, len(mat))) {
		t.Fatal("a zeroed secret got the shared copy of what it held")
	}
	o := NewSecret([]byte("shared-secret-test-other"))
	defer o.Zero()
	if so := o.Shared(); &so.Bytes()[0] == &sa.Bytes()[0] || !bytes.Equal(so.Bytes(), o.Bytes()) {
		t.Fatal("another material got the first one's copy")
	}
	runtime.KeepAlive(sa)
}

// TestSharedSecretDropped: once nothing refers to a shared copy, the next
// Shared makes a new one (the old one is wiped by its finalizer), and the
// table of shared copies does not grow with the copies dropped.
func TestSharedSecretDropped(t *testing.T) {
	mat := []byte("shared-secret-dropped-material")
	s := NewSecret(mat)
	defer s.Zero()
	for range 100 {
		_ = s.Shared()
		runtime.GC()
	}
	sharedSecrets.mu.Lock()
	n := len(sharedSecrets.m)
	sharedSecrets.mu.Unlock()
	if n > 32 {
		t.Errorf("%d entries after 100 copies made and dropped one at a time", n)
	}
	if sh := s.Shared(); !bytes.Equal(sh.Bytes(), mat) {
		t.Error("the copy made after the last one was dropped is not the material")
	}
}
