// Package testkit holds helpers shared by aokeyd's host tests.
package testkit

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// SharedTestBinary copies the running test binary into a fresh directory
// that every user may traverse and returns the directory and the copy's
// path (named name). Tests that run themselves as another uid need it:
// t.TempDir and the go build directory are 0700. The directory is removed
// when the test ends.
func SharedTestBinary(t testing.TB, prefix, name string) (dir, exe string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, name)
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, exe
}
