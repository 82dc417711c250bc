// Package golden compares test output with golden files and rewrites them
// when a test binary runs with -update:
//
//	golden.Check(t, "testdata/plan.golden", got)
//
// A mismatch fails the test with a unified diff from the golden file (-) to
// the output (+), so that a reviewer sees which lines changed rather than
// two whole texts.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files with the tests' output")

// Check compares got with the file at path. With -update it writes got to
// path instead (creating its directory) and passes.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (go test -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, Diff(path, "got", string(want), got))
	}
}
