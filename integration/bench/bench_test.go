package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/golden"
)

func loadFixture(t *testing.T) *Results {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, loadFixture(t)); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report.golden"), b.String())
}

// Every comparison line names its figure the way the issue asks.
func TestTableComparisonLines(t *testing.T) {
	r := loadFixture(t)
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	ratios, speedups := 0, 0
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "   N=") && strings.Contains(l, " raw ") && strings.Contains(l, " aokeyd ") {
			if !strings.Contains(l, "ratio=") {
				t.Errorf("comparison line without ratio=: %q", l)
			}
			ratios++
		}
		if strings.Contains(l, "/del [S=") {
			if !strings.Contains(l, "speedup=") {
				t.Errorf("delete comparison without speedup=: %q", l)
			}
			speedups++
		}
	}
	if want := 2 * len(r.Sizes); ratios != want {
		t.Errorf("%d ratio lines, want %d", ratios, want)
	}
	if speedups != len(r.Deletes) {
		t.Errorf("%d speedup lines, want %d", speedups, len(r.Deletes))
	}
}

func TestComparisonVerdict(t *testing.T) {
	tests := []struct {
		raw, aokeyd int64
		ratio       float64
		want        string
	}{
		{100, 100, 1, "met"},
		{100, 105, 1.05, "met"},
		{100, 126, 1.26, "MISSED by 20.0%"},
		{200, 100, 0.5, "met"},
		{0, 100, 0, "met"},
	}
	for _, tc := range tests {
		c := Comparison{Raw: tc.raw, Aokeyd: tc.aokeyd}
		if got := c.Ratio(); got < tc.ratio-1e-9 || got > tc.ratio+1e-9 {
			t.Errorf("Ratio(%d/%d) = %v, want %v", tc.aokeyd, tc.raw, got, tc.ratio)
		}
		if got := c.Verdict(); !strings.HasSuffix(got, tc.want) {
			t.Errorf("Verdict(%d/%d) = %q, want suffix %q", tc.aokeyd, tc.raw, got, tc.want)
		}
	}
}

func TestDeletes(t *testing.T) {
	d := Deletes{N: 16384, Sample: 256, SyncDelMean: 12_300_000, AsyncSampleMean: 370_000}
	if got := d.SyncDrainExtrapolated(); got != 12_300_000*16384 {
		t.Errorf("SyncDrainExtrapolated = %d", got)
	}
	if s := d.Speedup(); s < 33.2 || s > 33.3 {
		t.Errorf("Speedup = %v, want 33.24", s)
	}
	if v := SpeedupVerdict(d.Speedup()); !strings.HasSuffix(v, "met") {
		t.Errorf("SpeedupVerdict(33.2) = %q", v)
	}
	if v := SpeedupVerdict(15); !strings.HasSuffix(v, "MISSED by 50.0%") {
		t.Errorf("SpeedupVerdict(15) = %q", v)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []int64
		want int64
	}{
		{nil, 0},
		{[]int64{5}, 5},
		{[]int64{9, 1, 5}, 5},
		{[]int64{4, 1, 3, 2}, 2},
	}
	for _, tc := range tests {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseGoBench(t *testing.T) {
	in := `goos: linux
BenchmarkPlan-2   	      20	  52345678 ns/op	 28646656 B/op	  240001 allocs/op
BenchmarkPlan-2   	      22	  48000000 ns/op	 28646656 B/op	  240001 allocs/op
BenchmarkPlan-2   	      21	  50000000 ns/op	 28646656 B/op	  240001 allocs/op
BenchmarkOther log line without numbers here
PASS
`
	rows, err := ParseGoBench("host", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	if r := rows[0]; r.Where != "host" || r.Runs != 20 || r.NsPerOp != 52345678 || r.BytesPerOp != 28646656 || r.AllocsPerOp != 240001 {
		t.Errorf("row 0 = %+v", r)
	}
	m := MedianBench(rows)
	if len(m) != 1 || m[0].NsPerOp != 50000000 || m[0].Runs != 3 {
		t.Errorf("MedianBench = %+v, want the 50 ms row of 3", m)
	}
	// A benchmark's own metrics (b.ReportMetric) are kept by unit, and
	// repeated runs are ordered by CPU per pass where one is reported.
	idle, err := ParseGoBench("guest", strings.NewReader("BenchmarkIdlePass-2 1000 1139919 ns/op 52059 cpu-ns/pass 0 full-passes\n"+
		"BenchmarkIdlePass-2 1000 1000000 ns/op 90000 cpu-ns/pass 0 full-passes\n"+
		"BenchmarkIdlePass-2 1000 1200000 ns/op 45000 cpu-ns/pass 1 full-passes\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(idle) != 3 || idle[0].Extra[UnitCPUPerPass] != 52059 || idle[2].Extra["full-passes"] != 1 {
		t.Fatalf("idle rows %+v", idle)
	}
	if m := MedianBench(idle); len(m) != 1 || m[0].Extra[UnitCPUPerPass] != 52059 {
		t.Errorf("MedianBench(idle) = %+v, want the 52 µs row", m)
	}
	if _, err := ParseGoBench("host", strings.NewReader("BenchmarkX 3 abc ns/op\n")); err == nil {
		t.Error("bad ns/op accepted")
	}
}

func TestAllocsLinear(t *testing.T) {
	tests := []struct {
		name string
		pts  []PlanPoint
		want bool
	}{
		{"linear", []PlanPoint{{Peers: 100, AllocsPerOp: 2401}, {Peers: 1000, AllocsPerOp: 24001}}, true},
		{"quadratic", []PlanPoint{{Peers: 100, AllocsPerOp: 1000}, {Peers: 1000, AllocsPerOp: 100000}}, false},
		{"one point proves nothing", []PlanPoint{{Peers: 100, AllocsPerOp: 2400}}, false},
	}
	for _, tc := range tests {
		r := Results{Planner: tc.pts}
		if got, _, _ := r.AllocsLinear(); got != tc.want {
			t.Errorf("%s: AllocsLinear = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPlanSweep(t *testing.T) {
	pts, err := PlanSweep([]int{50, 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[1].Peers != 100 || pts[1].AllocsPerOp <= pts[0].AllocsPerOp || pts[0].NsPerOp <= 0 {
		t.Errorf("PlanSweep = %+v", pts)
	}
}

func TestSkips(t *testing.T) {
	r := &Results{}
	if s := Skips(r); len(s) != 2 || !strings.HasPrefix(s[0].Item, "3.") || !strings.HasPrefix(s[1].Item, "5.") {
		t.Errorf("nothing run: %+v", s)
	}
	r.Revoke = &RevokeRun{}
	if s := Skips(r); len(s) != 1 || !strings.HasPrefix(s[0].Item, "5.") {
		t.Errorf("revoke run: %+v", s)
	}
	r.Daemon = &DaemonRun{}
	if s := Skips(r); len(s) != 0 {
		t.Errorf("both run: %+v", s)
	}
}

// TestWriteProfile: pprof's file/time header lines are dropped, its summary
// lines kept, and the table cut after max rows.
func TestWriteProfile(t *testing.T) {
	top := "File: aokeyd-bench\nBuild ID: abc\nType: cpu\nTime: 2026-11-30\nDuration: 4.6s, Total samples = 690ms\n" +
		"      flat  flat%   sum%        cum   cum%\n" +
		"         0     0%     0%      480ms 69.57%  a\n" +
		"         0     0%     0%      300ms 43.48%  b\n" +
		"         0     0%     0%      100ms 14.49%  c\n"
	var b strings.Builder
	writeProfile(&tw{w: &b}, top, 2)
	want := "   Duration: 4.6s, Total samples = 690ms\n" +
		"         flat  flat%   sum%        cum   cum%\n" +
		"            0     0%     0%      480ms 69.57%  a\n" +
		"            0     0%     0%      300ms 43.48%  b\n"
	if b.String() != want {
		t.Errorf("writeProfile:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestTurns: the turns go raw, aokeyd, aokeyd, raw (ABBA) and are compared
// by means, so a drift linear in time favours neither rotator.
func TestTurns(t *testing.T) {
	var got []bool
	for i := range 8 {
		got = append(got, turnWho(i))
	}
	if want := []bool{false, true, true, false, false, true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("turn order %v, want %v", got, want)
	}
	// Kernel time growing 10 ms a turn, the rotators equal: ratio 1.
	r := &Results{Sizes: []Size{{N: 16, TurnsRawSys: []int64{100, 130, 140, 170}, TurnsAokeydSys: []int64{110, 120, 150, 160}}}}
	c := r.TurnTimes()
	if len(c) != 1 || c[0].Ratio() != 1 || c[0].Runs != 4 {
		t.Fatalf("TurnTimes = %+v, want one comparison of 4 turns each with ratio 1", c)
	}
}
