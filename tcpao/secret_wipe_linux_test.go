//go:build linux

package tcpao

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestSecretWipedOnceUnreferenced: a secret's copy that its owners drop
// without Zero (a peer's replaced desired keys, which the daemon and the
// peer's state machine shared) is wiped by the time the garbage collector
// has found it unreachable, and a copy still referred to is left intact.
// It does so for copies of three sizes (16, 24 and 32 bytes: secretBuf's
// size classes), the needle cut short.
func TestSecretWipedOnceUnreferenced(t *testing.T) {
	whole, _ := testkit.SecretNeedles(t, filepath.Join("..", "keystore", "testdata", "test-secrets.txt"), "aokeyd-test-secret-foxtrot")
	for _, n := range []int{16, 20, whole.Len()} {
		if n <= len(whole.Head) || n > whole.Len() {
			t.Fatalf("needle of %d bytes from a secret of %d", n, whole.Len())
		}
		raw := testkit.Needle{Head: whole.Head, Tail: whole.Tail[:n-len(whole.Head)]}
		t.Run(fmt.Sprint(n), func(t *testing.T) { secretWiped(t, raw) })
	}
}

func secretWiped(t *testing.T, raw testkit.Needle) {
	count := func() int {
		t.Helper()
		c, err := testkit.CountInMemory(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	b := raw.Join()
	held := NewSecret(b)
	func() {
		dropped := NewSecret(b)
		for range 3 {
			_ = dropped.Clone()
		}
		runtime.KeepAlive(dropped)
	}()
	clear(b)
	if got := count(); got < 2 {
		t.Fatalf("%d copies before the collection: want at least the held one and a dropped one", got)
	}
	if !testkit.CollectGarbage() {
		t.Fatal("the finalizers did not run")
	}
	if got := count(); got != 1 {
		t.Errorf("%d copies once collected, want 1: the held one", got)
	}
	want := raw.Join()
	intact := bytes.Equal(held.Bytes(), want)
	clear(want)
	if !intact {
		t.Error("the held secret changed")
	}
	held.Zero()
	if got := count(); got != 0 {
		t.Errorf("%d copies after Zero", got)
	}
}

// TestFingerprintLeavesNoCopy: making a Secret computes its fingerprint;
// the hasher must not leave the secret's bytes behind (SHA-256's Sum
// copies its block buffer, which held the secret's last bytes, to the
// stack of the goroutine that asked, where they stay while it sleeps).
func TestFingerprintLeavesNoCopy(t *testing.T) {
	raw, _ := testkit.SecretNeedles(t, filepath.Join("..", "keystore", "testdata", "test-secrets.txt"), "aokeyd-test-secret-foxtrot")
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		b := raw.Join()
		s := NewSecret(b)
		clear(b)
		s.Zero()
		close(ready)
		<-done
	}()
	<-ready
	defer close(done)
	c, err := testkit.CountInMemory(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c[0] != 0 {
		t.Errorf("%d copies of the secret after it was made and zeroed, want none", c[0])
	}
}

// TestSharedSecretWipedOnceUnreferenced: a shared copy (Shared) outlives
// Zero on it while a holder refers to it, and is wiped once nothing does.
func TestSharedSecretWipedOnceUnreferenced(t *testing.T) {
	raw, _ := testkit.SecretNeedles(t, filepath.Join("..", "keystore", "testdata", "test-secrets.txt"), "aokeyd-test-secret-foxtrot")
	count := func() int {
		t.Helper()
		c, err := testkit.CountInMemory(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	b := raw.Join()
	s := NewSecret(b)
	clear(b)
	held := []Secret{s.Shared(), s.Shared()}
	s.Zero()
	held[1].Zero() // a holder that drops it: the other still uses it
	if got := count(); got != 1 {
		t.Fatalf("%d copies with two holders of the shared one, want 1", got)
	}
	held = nil
	if !testkit.CollectGarbage() {
		t.Fatal("the finalizers did not run")
	}
	if got := count(); got != 0 {
		t.Errorf("%d copies once no holder refers to the shared one, want 0", got)
	}
}
