package lab

import (
	"path/filepath"
	"testing"
)

// TestRepoFile: the install script GobgpdBin runs under CI is found from a
// package directory of the integration module, whose own go.mod sits
// between it and the checkout's root.
func TestRepoFile(t *testing.T) {
	p, err := repoFile("integration/tools/gobgpd.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("../tools/gobgpd.sh"); p != want {
		t.Fatalf("repoFile: %s, want %s", p, want)
	}
	if _, err := repoFile("integration/tools/no-such-script.sh"); err == nil {
		t.Fatal("repoFile found a file that does not exist")
	}
}
