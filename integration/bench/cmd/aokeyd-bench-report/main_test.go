package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: one run writes the table (also printed), the data file, the
// chart and results.json with the host's additions.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.txt")
	if err := os.WriteFile(plan, []byte("BenchmarkPlan-2 20 52345678 ns/op 28646656 B/op 240001 allocs/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	var stdout bytes.Buffer
	if err := run([]string{"-in", filepath.Join("..", "..", "testdata", "results.json"), "-out", out, "-bench", "host=" + plan}, &stdout); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if table := read("report.txt"); !bytes.Equal(table, stdout.Bytes()) || !strings.Contains(string(table), "BenchmarkPlan") {
		t.Errorf("report.txt (%d bytes) is not what was printed (%d bytes), or lacks the -bench rows", len(table), stdout.Len())
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "report.tsv.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if got := read("report.tsv"); !bytes.Equal(got, want) {
		t.Errorf("report.tsv differs from the package's golden file:\n%s", got)
	}
	if _, err := png.Decode(bytes.NewReader(read("report.png"))); err != nil {
		t.Errorf("report.png: %v", err)
	}
	if !strings.Contains(string(read("results.json")), `"where": "host"`) {
		t.Error("results.json lacks the -bench rows")
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-in", filepath.Join(t.TempDir(), "missing.json")},
		{"-in", filepath.Join("..", "..", "testdata", "results.json"), "-out", t.TempDir(), "-bench", "no-equals-sign"},
	} {
		if err := run(args, new(bytes.Buffer)); err == nil {
			t.Errorf("run(%q): no error", args)
		}
	}
}
