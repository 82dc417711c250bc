package birdnative

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/tcpao"
)

func keyText(send, recv uint8, secret string, preferred bool) []byte {
	return render([]bird.Key{{SendID: send, RecvID: recv, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte(secret)), Preferred: preferred}}, false)
}

// TestShapeOf: files that differ in their secrets' digits only share a
// shape; another ID, flag or secret length is another shape.
func TestShapeOf(t *testing.T) {
	base := shapeOf(keyText(1, 101, "sixteen byte key", true))
	for _, tc := range []struct {
		name string
		file []byte
		same bool
	}{
		{"other digits", keyText(1, 101, "another 16 bytes", true), true},
		{"other send id", keyText(2, 101, "sixteen byte key", true), false},
		{"not preferred", keyText(1, 101, "sixteen byte key", false), false},
		{"longer secret", keyText(1, 101, "seventeen byte ke", true), false},
		{"disabled", render(nil, true), false},
	} {
		if got := shapeOf(tc.file) == base; got != tc.same {
			t.Errorf("%s: same shape %v, want %v", tc.name, got, tc.same)
		}
	}
}

// fakeBirdParser is a `bird -p` that counts its runs and the protocols it
// was given (a line each in runs) and refuses a configuration including a
// file with "send id 9".
func fakeBirdParser(t *testing.T) (bin, runs string) {
	dir := t.TempDir()
	bin, runs = filepath.Join(dir, "bird"), filepath.Join(dir, "runs")
	script := `#!/bin/sh
conf=$3
n=$(grep -c '^protocol bgp' "$conf")
echo "$n" >> ` + runs + `
for f in $(sed -n 's/.*include "\(.*\)";/\1/p' "$conf"); do
	if grep -q 'send id 9;' "$f"; then echo "$f:2:3 refused"; exit 1; fi
done
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, runs
}

func readRuns(t *testing.T, runs string) string {
	b, err := os.ReadFile(runs)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// TestValidateOncePerShape: BIRD's parser sees one file of each shape it
// has not taken; a revoke's rewrite of files of taken shapes runs no
// `bird -p`; a refused shape is refused for each of its files and never
// remembered; another binary starts over.
func TestValidateOncePerShape(t *testing.T) {
	bin, runs := fakeBirdParser(t)
	var s shapeChecker
	ctx := context.Background()
	members := [][]byte{keyText(1, 101, "member one's key", true), keyText(1, 101, "member two's key", true), keyText(2, 102, "member 3's key!!", true)}
	errs := s.validate(ctx, bin, members)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	if got := readRuns(t, runs); got != "2" {
		t.Fatalf("bird -p runs (protocols each) %q, want one run of 2 (one a shape)", got)
	}
	// The same shapes again, other secrets (a revoke's rewrite): no run.
	again := [][]byte{keyText(1, 101, "member 1's key 2", true), keyText(2, 102, "member 3's key 2", true)}
	if errs := s.validate(ctx, bin, again); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	if got := readRuns(t, runs); got != "2" {
		t.Fatalf("bird -p runs %q after files of taken shapes, want no new run", got)
	}
	// A refused shape: each of its files refused, a taken one still taken.
	bad := [][]byte{keyText(9, 109, "member one's key", true), keyText(9, 109, "member two's key", true), keyText(1, 101, "member 1's key 3", true)}
	errs = s.validate(ctx, bin, bad)
	if errs[0] == nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errors %v, want the two send id 9 files refused", errs)
	}
	if !strings.Contains(errs[0].Error(), "refused") {
		t.Errorf("error %v, want BIRD's message", errs[0])
	}
	if got := readRuns(t, runs); got != "2 1" {
		t.Fatalf("bird -p runs %q, want one more of the one new shape", got)
	}
	s.validate(ctx, bin, bad[:1])
	if got := readRuns(t, runs); got != "2 1 1" {
		t.Fatalf("bird -p runs %q, want the refused shape checked again", got)
	}
	// An upgraded BIRD (the binary replaced) checks every shape again.
	if err := os.WriteFile(bin+".new", []byte("#!/bin/sh\necho 1 >> "+runs+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	s.validate(ctx, bin, again)
	if got := readRuns(t, runs); got != "2 1 1 1" {
		t.Fatalf("bird -p runs %q, want a run after the binary changed", got)
	}
}
