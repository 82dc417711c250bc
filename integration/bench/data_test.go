package bench

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/golden"
)

// TestWriteDataGolden: the fixture's data file, byte for byte (go test
// -update rewrites it).
func TestWriteDataGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteData(&b, loadFixture(t)); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "report.tsv.golden"), b.String())
}

// TestWriteDataShape: a header, then rows of six tab-separated fields
// whose n, value and runs are integers and whose (item, n, series) never
// repeats, so two runs' files join on it.
func TestWriteDataShape(t *testing.T) {
	r := loadFixture(t)
	r.Revoke = &RevokeRun{Peers: 1000, ToDone: 1}
	r.Daemon = &DaemonRun{Peers: 4096, IdlePassCPU: 1}
	var b bytes.Buffer
	if err := WriteData(&b, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if lines[0] != DataHeader {
		t.Fatalf("header %q, want %q", lines[0], DataHeader)
	}
	if got, want := len(lines)-1, len(r.Points()); got != want {
		t.Fatalf("%d rows, want one per point (%d)", got, want)
	}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 6 {
			t.Fatalf("row %q: %d fields, want 6", l, len(f))
		}
		for _, i := range []int{1, 3, 5} {
			if _, err := strconv.ParseInt(f[i], 10, 64); err != nil {
				t.Errorf("row %q: field %d is not an integer", l, i+1)
			}
		}
		if k := f[0] + " " + f[1] + " " + f[2]; seen[k] {
			t.Errorf("row key %q repeats", k)
		} else {
			seen[k] = true
		}
	}
}

func TestPoints(t *testing.T) {
	tests := []struct {
		name string
		r    Results
		want []Point
	}{
		{"nothing run", Results{}, nil},
		{"install and rotate: medians, runs counted", Results{Sizes: []Size{{N: 64,
			InstallRaw: []int64{30, 10, 20}, InstallAokeyd: []int64{21, 22, 23},
			RotateRaw: []int64{5, 7, 6}, RotateAokeyd: []int64{9, 8, 7}}}},
			[]Point{
				{ItemInstall, 64, "raw", 20, UnitNs, 3}, {ItemInstall, 64, "aokeyd", 22, UnitNs, 3},
				{ItemRotate, 64, "raw", 6, UnitNs, 3}, {ItemRotate, 64, "aokeyd", 8, UnitNs, 3},
			}},
		{"deletes: sampled means and the extrapolated drain", Results{Deletes: []Deletes{{N: 1000, Sample: 10, SyncDelMean: 300, AsyncSampleMean: 3, AsyncDrain: 5000}}},
			[]Point{
				{ItemDelete, 1000, "sync_per_delete", 300, UnitNs, 10}, {ItemDelete, 1000, "async_per_delete", 3, UnitNs, 10},
				{ItemDelete, 1000, "sync_drain_extrapolated", 300_000, UnitNs, 10}, {ItemDelete, 1000, "async_drain", 5000, UnitNs, 1},
			}},
		{"planner: time, allocations and bytes per plan", Results{Planner: []PlanPoint{{Peers: 500, NsPerOp: 7, AllocsPerOp: 8, BytesPerOp: 9, Runs: 4}}},
			[]Point{
				{ItemPlanner, 500, "planall", 7, UnitNs, 4}, {ItemPlanner, 500, "planall_allocs", 8, UnitAllocs, 4},
				{ItemPlanner, 500, "planall_bytes", 9, UnitBytes, 4},
			}},
		{"revoke", Results{Revoke: &RevokeRun{Peers: 10, ToDone: 1, Wall: 2, Server: 3, ToArrival: 4, ExecBaseline: 5}},
			[]Point{
				{ItemRevoke, 10, "exec_to_done", 1, UnitNs, 1}, {ItemRevoke, 10, "exec_to_exit", 2, UnitNs, 1},
				{ItemRevoke, 10, "daemon", 3, UnitNs, 1}, {ItemRevoke, 10, "exec_to_arrival", 4, UnitNs, 1},
				{ItemRevoke, 10, "exec_baseline", 5, UnitNs, 1},
			}},
		{"daemon: CPU per pass over its passes, memory in bytes", Results{Daemon: &DaemonRun{Peers: 20,
			IdlePassCPU: 1, IdlePasses: 100, FullPassCPU: 2, FullPasses: 3, ChangePassCPU: 4, ChangePasses: 5,
			SteadyCPUPerSec: 6, ScrapeCPU: 7, ScrapeCPUs: []int64{7, 7}, RSSDaemon: 900, RSSHarness: 600, HeapDaemon: 50}},
			[]Point{
				{ItemDaemon, 20, "idle_pass_cpu", 1, UnitNs, 100}, {ItemDaemon, 20, "full_pass_cpu", 2, UnitNs, 3},
				{ItemDaemon, 20, "change_pass_cpu", 4, UnitNs, 5}, {ItemDaemon, 20, "steady_cpu_per_s", 6, UnitNs, 1},
				{ItemDaemon, 20, "scrape_cpu", 7, UnitNs, 2}, {ItemDaemon, 20, "rss", 900, UnitBytes, 1},
				{ItemDaemon, 20, "rss_daemon_share", 300, UnitBytes, 1}, {ItemDaemon, 20, "heap", 50, UnitBytes, 1},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Points(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Points() =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestResultsRoundTrip(t *testing.T) {
	r := loadFixture(t)
	r.Revoke = &RevokeRun{Peers: 3, Actions: map[string]int{"removed": 4}}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteResults(path, r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("read back %+v, want %+v", got, r)
	}
	if _, err := ReadResults(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file read without an error")
	}
}
