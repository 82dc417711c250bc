package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// Bin finds a program the scenarios run (aokeyd, aoctl, gobgpd, bird) in
// PATH, where the VM harness puts what AOKEYD_GUEST_BINS names.
func Bin(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not in PATH (the VM harness puts it there through AOKEYD_GUEST_BINS, see integration/tools/guest-bins.sh): %w", name, err)
	}
	return p, nil
}

// MustBin is Bin that fails the test.
func MustBin(t testing.TB, name string) string {
	t.Helper()
	p, err := Bin(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// GobgpdBin returns the gobgpd v3.37 binary: $AOKEYD_GOBGPD, the cache that
// integration/tools/gobgpd.sh installs into, or PATH; with CI=true a missing
// one is installed by that script. Otherwise the test fails inside the
// guest VM (where the harness must have provided it) and skips elsewhere.
func GobgpdBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AOKEYD_GOBGPD"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if p := filepath.Join(cache, "aokeyd", "bin", "gobgpd"); cache != "" && isExec(p) {
		return p
	}
	if p, err := exec.LookPath("gobgpd"); err == nil {
		return p
	}
	const why = "gobgpd v3.37 not found: run integration/tools/gobgpd.sh (or set AOKEYD_GOBGPD; in the guest, AOKEYD_GUEST_BINS)"
	if kerneltest.InGuest() {
		t.Fatal(why)
	}
	if os.Getenv("CI") == "true" {
		script, err := repoFile("integration/tools/gobgpd.sh")
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", script).Output()
		if err != nil {
			t.Fatalf("installing gobgpd with %s: %v", script, err)
		}
		return filepath.Join(strings.TrimSpace(string(out)), "gobgpd")
	}
	t.Skip(why)
	return ""
}

// GobgpdV4Bin returns the gobgpd v4.8.0 binary, gobgpd-v4: $AOKEYD_GOBGPD_V4,
// the cache integration/tools/gobgpd.sh installs into, or PATH; found,
// installed, failed or skipped as GobgpdBin.
func GobgpdV4Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AOKEYD_GOBGPD_V4"); p != "" {
		return p
	}
	v3 := GobgpdBin(t) // installs both with CI=true
	if p := filepath.Join(filepath.Dir(v3), "gobgpd-v4"); isExec(p) {
		return p
	}
	if p, err := exec.LookPath("gobgpd-v4"); err == nil {
		return p
	}
	const why = "gobgpd-v4 (v4.8.0) not found: run integration/tools/gobgpd.sh (or set AOKEYD_GOBGPD_V4; in the guest, AOKEYD_GUEST_BINS)"
	if kerneltest.InGuest() || os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// repoFile finds path (relative to the checkout's root) from the working
// directory, which is a package directory when tests run: in it or the
// nearest of its parents that has it. (Not the nearest go.mod: integration/
// is a module of its own inside the checkout.)
func repoFile(path string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if p := filepath.Join(dir, path); fileExists(p) {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s: not in the working directory nor above it", path)
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
