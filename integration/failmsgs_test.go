package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFailMsgs checks the summary run.sh prints last after a failed guest
// run: each failed test's own messages, in the order the tests failed,
// with interleaved parallel tests kept apart, dump pointers left out and
// the last keep messages each, each cut to
// its first lines lines, and a parent
// with no messages of its own (its subtest failed) left out.
func TestFailMsgs(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Fatalf("awk not found: run.sh needs it: %v", err)
	}
	log := `=== RUN   TestA
=== PAUSE TestA
=== RUN   TestB
=== CONT  TestA
    a_test.go:1: a says hello
=== NAME  TestB
    b_test.go:2: first
    b_test.go:3: second
        continued
        more
        and more
=== NAME  TestA
    a_test.go:4: a again
--- PASS: TestA (1.00s)
=== NAME  TestB
    b_test.go:5: seed 1: stranded: 10.0.0.1
    hosts.go:100: gobgpd.log (tail): 37 lines, printed after the run's verdicts (0001-TestB.txt)
--- FAIL: TestB (2.00s)
=== RUN   TestC/sub
    c_test.go:7: sub failed
    --- FAIL: TestC/sub (0.10s)
--- FAIL: TestC (0.10s)
FAIL
`
	cmd := exec.Command("awk", "-v", "keep=2", "-v", "lines=2", "-f", "vm/failmsgs.awk")
	cmd.Stdin = strings.NewReader(log)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := `--- TestB: its last messages:
    b_test.go:3: second
        continued
        [...]
    b_test.go:5: seed 1: stranded: 10.0.0.1
--- TestC/sub: its last messages:
    c_test.go:7: sub failed
`
	if string(out) != want {
		t.Errorf("failmsgs.awk printed:\n%s\nwant:\n%s", out, want)
	}
}
