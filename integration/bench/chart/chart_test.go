package chart

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/integration/bench"
)

func fixture(t *testing.T) *bench.Results {
	t.Helper()
	r, err := bench.ReadResults(filepath.Join("..", "testdata", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// full is the fixture with the daemon items run as well.
func full(t *testing.T) *bench.Results {
	r := fixture(t)
	r.Revoke = &bench.RevokeRun{Peers: 1000, ToDone: 120e6, Wall: 310e6, Server: 95e6, ExitOK: true, KeyGone: 1001, DataOK: 1000}
	r.Daemon = &bench.DaemonRun{Peers: 4096, KeysPerPeer: 4, RSSDaemon: 60 << 20, IdlePassCPU: 52e3, FullPassCPU: 9e6, ChangePassCPU: 25e6, SteadyCPUPerSec: 1.2e6}
	return r
}

// TestWritePNG: the chart is a Width x Height PNG, and every series' colour
// fills bars (a legend swatch alone is a few hundred pixels).
func TestWritePNG(t *testing.T) {
	for name, r := range map[string]*bench.Results{"fixture": fixture(t), "with daemon items": full(t), "empty": {}} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WritePNG(&b, r); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&b)
			if err != nil {
				t.Fatal(err)
			}
			if sz := img.Bounds().Size(); sz.X != Width || sz.Y != Height {
				t.Fatalf("size %v, want %dx%d", sz, Width, Height)
			}
			count := colours(img)
			want := map[string]color.RGBA{"raw": colRaw, "aokeyd": colAokeyd, "sync": colSync, "async": colAsync}
			if len(r.Sizes) == 0 {
				want = nil
			}
			for name, c := range want {
				if count[c] < 5000 {
					t.Errorf("%s bars: %d pixels of %v", name, count[c], c)
				}
			}
			if len(r.Sizes) == 0 && count[colAokeyd] > 0 {
				t.Errorf("empty results drew %d pixels of aokeyd bars", count[colAokeyd])
			}
		})
	}
}

// colours counts img's pixels by colour.
func colours(img image.Image) map[color.RGBA]int {
	count := map[color.RGBA]int{}
	if m, ok := img.(*image.RGBA); ok { // what png.Decode returns for an opaque chart
		for i := 0; i+3 < len(m.Pix); i += 4 {
			count[color.RGBA{m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3]}]++
		}
		return count
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	return count
}

// TestPanels: titles, groups with their notes (MISSED where a target is
// missed, as the table says), and one value per group in every series.
func TestPanels(t *testing.T) {
	ps := panels(full(t))
	if len(ps) != 6 {
		t.Fatalf("%d panels, want 6", len(ps))
	}
	tests := []struct {
		title  string
		groups []string
		series map[string][]float64
	}{
		{"1. install N peer keys", []string{"N=256\nratio=2.10 MISSED", "N=1024\nratio=0.84"},
			map[string][]float64{"raw loop": {38335849, 222260039}, "aokeyd": {80570475, 187736203}}},
		{"2. rotate all N peers", []string{"N=256\nratio=1.02", "N=1024\nratio=1.85 MISSED"},
			map[string][]float64{"raw loop": {133602276, 346085659}, "aokeyd": {136558484, 640993664}}},
		{"2b. time per delete, same plan", []string{"N=256\nspeedup=343.2", "N=1024\nspeedup=99.1"},
			map[string][]float64{"sync (sampled)": {15809315, 15430267}, "del_async": {46062, 155714}}},
		{"4. planner alone (PlanAll), time per plan", []string{"500 peers\n24.0 allocs/peer", "1000 peers\n24.0 allocs/peer"},
			map[string][]float64{"guest sweep": {63902488, 122189753}}},
		{"3. revoke one key: 1000 sessions + listener", []string{"1001/1001 sockets clean\ntarget<1s met"},
			map[string][]float64{"exec to last socket done": {120e6}, "exec to exit": {310e6}, "daemon": {95e6}}},
		{"5. daemon, 4096 peers x 4 keys: RSS 60.0 MiB (target<100.0 MiB met)", []string{"idle pass\ntarget<1ms met", "full pass", "change pass", "steady CPU per s"},
			map[string][]float64{"CPU per pass": {52e3, 9e6, 25e6, 0}, "idle CPU per second": {0, 0, 0, 1.2e6}}},
	}
	for i, tc := range tests {
		p := ps[i]
		if p.title != tc.title {
			t.Errorf("panel %d: title %q, want %q", i, p.title, tc.title)
		}
		if !reflect.DeepEqual(p.groups, tc.groups) {
			t.Errorf("%s: groups %q, want %q", p.title, p.groups, tc.groups)
		}
		got := map[string][]float64{}
		for _, s := range p.series {
			if len(s.values) != len(p.groups) {
				t.Errorf("%s: series %q has %d values for %d groups", p.title, s.label, len(s.values), len(p.groups))
			}
			got[s.label] = s.values
		}
		if !reflect.DeepEqual(got, tc.series) {
			t.Errorf("%s: series %v, want %v", p.title, got, tc.series)
		}
	}
	if ps := panels(&bench.Results{}); ps[4].title != "3. emergency revoke (aoctl): not run" || ps[5].title != "5. daemon: not run" || len(ps[4].series)+len(ps[5].series) != 0 {
		t.Errorf("daemon items not run: %q %q", ps[4].title, ps[5].title)
	}
}

// TestBarsAreInTheData: every bar the chart draws is a row of the data
// file, so a user re-plotting report.tsv gets the same figures.
func TestBarsAreInTheData(t *testing.T) {
	r := full(t)
	rows := map[int64]bool{}
	for _, p := range r.Points() {
		if p.Unit == bench.UnitNs {
			rows[p.Value] = true
		}
	}
	n := 0
	for _, p := range panels(r) {
		for _, s := range p.series {
			for _, v := range s.values {
				if v <= 0 {
					continue
				}
				n++
				if !rows[int64(v)] {
					t.Errorf("%s: %s bar %v is not in the data file", p.title, s.label, v)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d bars checked", n)
	}
}

func TestDecades(t *testing.T) {
	tests := []struct {
		lo, hi      float64
		major       []string
		minor       int
		first, last float64
	}{
		{1e7, 1.5e9, []string{"10.0 ms", "100 ms", "1.00 s"}, 16, 1e7, 1e9},
		{1e4, 1e4 * 3.5, []string{"10.0 µs"}, 2, 1e4, 3e4},
		{100, 1e6, []string{"100 ns", "1.00 µs", "10.0 µs", "100 µs", "1.00 ms"}, 32, 100, 1e6},
	}
	for _, tc := range tests {
		ticks := decades(tc.lo, tc.hi)
		var major []string
		minor := 0
		for _, tk := range ticks {
			if tk.Label != "" {
				major = append(major, tk.Label)
			} else {
				minor++
			}
		}
		if !reflect.DeepEqual(major, tc.major) || minor != tc.minor {
			t.Errorf("decades(%g, %g): major %q minor %d, want %q and %d", tc.lo, tc.hi, major, minor, tc.major, tc.minor)
		}
		if ticks[0].Value != tc.first || ticks[len(ticks)-1].Value != tc.last {
			t.Errorf("decades(%g, %g) spans %g..%g, want %g..%g", tc.lo, tc.hi, ticks[0].Value, ticks[len(ticks)-1].Value, tc.first, tc.last)
		}
	}
}

func TestNote(t *testing.T) {
	if got := note("ratio=1.00", true); got != "ratio=1.00" {
		t.Errorf("met: %q", got)
	}
	if got := note("ratio=2.00", false); !strings.HasSuffix(got, " MISSED") {
		t.Errorf("missed: %q", got)
	}
}
