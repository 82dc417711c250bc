package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTailKeepsLogBeforeGoroutineDump: a failed test's aokeyd gets
// SIGQUIT before its log is dumped (StartAokeyd), and Go's goroutine dump
// is longer than any tail; the log's own last lines must survive it.
func TestTailKeepsLogBeforeGoroutineDump(t *testing.T) {
	log := strings.Repeat(`{"level":"INFO","msg":"early"}`+"\n", 100) + `{"level":"INFO","msg":"the last log line"}` + "\n"
	dump := "SIGQUIT: quit\nPC=0x494fc1 m=0 sigcode=0\n\ngoroutine 1 gp=0x1 m=nil [select]:\n" + strings.Repeat("runtime.gopark(...)\n\t/usr/local/go/src/runtime/proc.go:462\n", 2000)
	for _, tc := range []struct {
		name, text string
		want       []string
		notWant    []string
	}{
		{"no dump", log, []string{"the last log line", "..."}, []string{"goroutine dump"}},
		{"dump after the log", log + dump, []string{"the last log line", "goroutine dump", "goroutine 1 gp=0x1"}, nil},
		{"only a dump", dump, []string{"goroutine dump", "SIGQUIT: quit"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "aokeyd.log")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got := Tail(p, 1000)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Tail lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("Tail has %q:\n%s", w, got)
				}
			}
			if len(got) > 2200 {
				t.Errorf("Tail is %d bytes for n=1000", len(got))
			}
		})
	}
}
