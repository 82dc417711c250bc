package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// DumpDirEnv names the directory where Dump writes what a failed test
// leaves behind (the guest run sets it to its share, and prints the files
// after every package's verdict): the failure message itself then stays in
// view in a CI log's excerpt around the first "--- FAIL", where a long log
// tail printed by a cleanup (which runs after the failure) pushed it out.
const DumpDirEnv = "AOKEYD_DUMP_DIR"

var dumps atomic.Int64

// Dump records text under title for a failed test: into its own file under
// $AOKEYD_DUMP_DIR with a one-line pointer in the test's log, or, without
// that variable, into the test's log.
func Dump(t testing.TB, title, text string) {
	t.Helper()
	dir := os.Getenv(DumpDirEnv)
	if dir == "" {
		t.Logf("%s:\n%s", title, text)
		return
	}
	name := fmt.Sprintf("%04d-%s-%s.txt", dumps.Add(1), unsafeName.ReplaceAllString(t.Name(), "_"), unsafeName.ReplaceAllString(title, "_"))
	if len(name) > 200 {
		name = name[:200]
	}
	body := fmt.Sprintf("=== %s: %s\n%s\n", t.Name(), title, strings.TrimRight(text, "\n"))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err = os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err == nil {
			t.Logf("%s: %d lines, printed after the run's verdicts (%s)", title, strings.Count(text, "\n")+1, name)
			return
		}
	}
	t.Logf("%s:\n%s", title, text)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
