package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// A Point is one figure of the report: a row of the data file (report.tsv)
// and, where its unit is UnitNs, a bar the chart can draw.
type Point struct {
	// Item is the report's item (ItemInstall, ItemRotate, ...); N the
	// peers it was measured over (for the planner, the fleet size).
	Item string
	N    int
	// Series names the figure within the item ("raw", "aokeyd",
	// "idle_pass_cpu", ...); with Item and N it identifies the row, so two
	// runs' data files line up for diff or join.
	Series string
	Value  int64
	Unit   string
	// Runs is how many measurements Value comes from: repetitions (the
	// value is their median), sampled peers or passes (their mean), or 1.
	Runs int
}

// The report's items, in the data file's first column.
const (
	ItemInstall = "install"
	ItemRotate  = "rotate"
	ItemDelete  = "delete"
	ItemPlanner = "planner"
	ItemRevoke  = "revoke"
	ItemDaemon  = "daemon"
)

// The data file's units.
const (
	UnitNs     = "ns"
	UnitBytes  = "bytes"
	UnitAllocs = "allocs"
)

// DataHeader is the data file's first line.
const DataHeader = "item\tn\tseries\tvalue\tunit\truns"

// Points lists the report's figures in the table's order: every bar of the
// chart (install and rotation medians, per-delete means, the planner, the
// revoke, the daemon's CPU per pass) and the memory and drain figures beside
// them. Items that were not run have no rows.
func (r *Results) Points() []Point {
	var out []Point
	add := func(item string, n int, series string, v int64, unit string, runs int) {
		out = append(out, Point{Item: item, N: n, Series: series, Value: v, Unit: unit, Runs: runs})
	}
	install, rotate := r.Comparisons()
	for _, cs := range []struct {
		item string
		cs   []Comparison
	}{{ItemInstall, install}, {ItemRotate, rotate}} {
		for _, c := range cs.cs {
			add(cs.item, c.N, "raw", c.Raw, UnitNs, c.Runs)
			add(cs.item, c.N, "aokeyd", c.Aokeyd, UnitNs, c.Runs)
		}
	}
	for _, d := range r.Deletes {
		add(ItemDelete, d.N, "sync_per_delete", d.SyncDelMean, UnitNs, d.Sample)
		add(ItemDelete, d.N, "async_per_delete", d.AsyncSampleMean, UnitNs, d.Sample)
		add(ItemDelete, d.N, "sync_drain_extrapolated", d.SyncDrainExtrapolated(), UnitNs, d.Sample)
		add(ItemDelete, d.N, "async_drain", d.AsyncDrain, UnitNs, 1)
	}
	for _, p := range r.Planner {
		add(ItemPlanner, p.Peers, "planall", p.NsPerOp, UnitNs, p.Runs)
		add(ItemPlanner, p.Peers, "planall_allocs", p.AllocsPerOp, UnitAllocs, p.Runs)
		add(ItemPlanner, p.Peers, "planall_bytes", p.BytesPerOp, UnitBytes, p.Runs)
	}
	if v := r.Revoke; v != nil {
		add(ItemRevoke, v.Peers, "exec_to_done", v.ToDone, UnitNs, 1)
		add(ItemRevoke, v.Peers, "exec_to_exit", v.Wall, UnitNs, 1)
		add(ItemRevoke, v.Peers, "daemon", v.Server, UnitNs, 1)
		add(ItemRevoke, v.Peers, "exec_to_arrival", v.ToArrival, UnitNs, 1)
		add(ItemRevoke, v.Peers, "exec_baseline", v.ExecBaseline, UnitNs, 1)
	}
	if v := r.Daemon; v != nil {
		add(ItemDaemon, v.Peers, "idle_pass_cpu", v.IdlePassCPU, UnitNs, v.IdlePasses)
		add(ItemDaemon, v.Peers, "full_pass_cpu", v.FullPassCPU, UnitNs, v.FullPasses)
		add(ItemDaemon, v.Peers, "change_pass_cpu", v.ChangePassCPU, UnitNs, v.ChangePasses)
		add(ItemDaemon, v.Peers, "steady_cpu_per_s", v.SteadyCPUPerSec, UnitNs, 1)
		add(ItemDaemon, v.Peers, "scrape_cpu", v.ScrapeCPU, UnitNs, max(len(v.ScrapeCPUs), 1))
		add(ItemDaemon, v.Peers, "rss", v.RSSDaemon, UnitBytes, 1)
		add(ItemDaemon, v.Peers, "rss_daemon_share", v.DaemonRSS(), UnitBytes, 1)
		add(ItemDaemon, v.Peers, "heap", v.HeapDaemon, UnitBytes, 1)
	}
	return out
}

// WriteData writes r's Points as tab-separated values under DataHeader, one
// row per point: a file gnuplot, a spreadsheet or two runs' diff reads as
// it is.
func WriteData(w io.Writer, r *Results) error {
	var b strings.Builder
	b.WriteString(DataHeader + "\n")
	for _, p := range r.Points() {
		fmt.Fprintf(&b, "%s\t%d\t%s\t%d\t%s\t%d\n", p.Item, p.N, p.Series, p.Value, p.Unit, p.Runs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteResults writes r as indented JSON (results.json) to path.
func WriteResults(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResults reads a results.json that WriteResults wrote.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
