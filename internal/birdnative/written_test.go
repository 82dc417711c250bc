package birdnative

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestWrittenCache: an include file read once is not read again while it
// is the same file; a rewrite (renamed over), an edit in place, a symlink
// planted or the file removed is seen at the next read, with readFile's
// and parseFile's answers.
func TestWrittenCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "192.0.2.2.conf")
	file := func(send uint8) []byte {
		return render([]bird.Key{{SendID: send, RecvID: send + 100, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte("sixteen byte key")), Preferred: true}}, false)
	}
	var c writtenCache
	read := func(when string, wantSend uint8, wantReads int) {
		t.Helper()
		w, err := c.written(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		got := uint8(0)
		if len(w.Keys) == 1 {
			got = w.Keys[0].SendID
		}
		if got != wantSend || c.reads != wantReads {
			t.Fatalf("%s: send id %d after %d reads, want %d after %d", when, got, c.reads, wantSend, wantReads)
		}
	}
	if err := durable.Write(path, file(1), 0o600); err != nil {
		t.Fatal(err)
	}
	read("first", 1, 1)
	read("unchanged", 1, 1)
	read("unchanged again", 1, 1)
	if err := durable.Write(path, file(2), 0o600); err != nil {
		t.Fatal(err)
	}
	read("rewritten", 2, 2)
	// An edit in place, same size: the modification time tells.
	b := file(3)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	read("edited in place", 3, 3)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	read("removed", 0, 4)
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.written(path); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("a symlink at the file: %v, want readFile's refusal", err)
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte("key { send id 1; recv id 101; secret hex:zz; algorithm hmac sha1; };\nnot aokeyd's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := c.written(path); err != nil || len(w.Keys) != 0 {
		t.Fatalf("a file with no key line of aokeyd's form: %+v, %v", w, err)
	}
}
