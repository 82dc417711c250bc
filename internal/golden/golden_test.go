package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what a check reports.
type recorder struct {
	testing.TB
	errs   []string
	failed bool
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.golden")
	if err := os.WriteFile(path, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, got string
		update    bool
		fail      string // what the failure says, "" for none
		file      string // the golden file afterwards
	}{
		{"match", "one\ntwo\n", false, "", "one\ntwo\n"},
		{"mismatch", "one\n2\n", false, "@@ -1,2 +1,2 @@\n one\n-two\n+2\n", "one\ntwo\n"},
		{"update", "one\n2\n", true, "", "one\n2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			*update = tc.update
			defer func() { *update = false }()
			r := &recorder{TB: t}
			Check(r, path, tc.got)
			if r.failed != (tc.fail != "") || (tc.fail != "" && !strings.HasSuffix(r.errs[0], tc.fail)) {
				t.Fatalf("failed = %v %q, want %q", r.failed, r.errs, tc.fail)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.file {
				t.Fatalf("golden file %q, want %q", b, tc.file)
			}
		})
	}
	r := &recorder{TB: t}
	Check(r, filepath.Join(dir, "missing.golden"), "x")
	if !r.failed || !strings.Contains(r.errs[0], "-update") {
		t.Fatalf("a missing golden file: %v", r.errs)
	}
}
