package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With AOKEYD_DUMP_DIR set, a dump lands in a file of its own, named after
// the test and the title, with a header the guest run prints.
func TestDumpToDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DumpDirEnv, dir)
	Dump(t, "aokeyd.log (tail)", "line 1\nline 2\n")
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v (%v), want one", files, err)
	}
	if b := filepath.Base(files[0]); !strings.Contains(b, "TestDumpToDir-aokeyd.log_tail_") {
		t.Errorf("file name %q", b)
	}
	b, _ := os.ReadFile(files[0])
	if want := "=== TestDumpToDir: aokeyd.log (tail)\nline 1\nline 2\n"; string(b) != want {
		t.Errorf("dump %q, want %q", b, want)
	}
}
