// Package chart draws the bench report's chart (report.png) with
// gonum.org/v1/plot: the install and rotation comparisons, the per-delete
// cost, the planner, the emergency revoke and the daemon's CPU per pass,
// each a panel of grouped bars on a log scale with its value on every bar.
//
// It is a package of its own, linked only into the host's
// aokeyd-bench-report, because gonum/plot parses its fonts when the program
// starts: in the guest's aokeyd-bench that heap would sit in the RSS the
// daemon item measures (make lint checks aokeyd-bench does not link it).
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/aokeyd/aokeyd/integration/bench"
)

// The chart's size: Width x Height pixels at DPI.
const (
	Width, Height = 1400, 1380
	DPI           = 100
)

// The series' colours.
var (
	colRaw    = color.RGBA{150, 150, 150, 255}
	colAokeyd = color.RGBA{40, 110, 200, 255}
	colSync   = color.RGBA{210, 60, 50, 255}
	colAsync  = color.RGBA{40, 160, 80, 255}
	colMiss   = color.RGBA{200, 30, 30, 255}
)

// A panel is one plot: groups along x (one per N), and in each group one
// bar per series that has a positive value there.
type panel struct {
	title  string
	groups []string // x labels; a second line is the group's note
	series []series
}

type series struct {
	label  string
	color  color.Color
	values []float64 // nanoseconds, one per group; <= 0: no bar
}

// WritePNG draws r's chart as a PNG of Width x Height pixels.
func WritePNG(w io.Writer, r *bench.Results) error {
	c := vgimg.NewWith(vgimg.UseWH(vg.Length(Width)*vg.Inch/DPI, vg.Length(Height)*vg.Inch/DPI), vgimg.UseDPI(DPI))
	dc := draw.New(c)
	head := text.Style{Color: color.Black, Font: sans(14), YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	margin := 0.15 * vg.Inch
	dc.FillText(head, vg.Point{X: margin, Y: dc.Max.Y - margin}, header(r))
	headH := head.Height(header(r)) + 2*margin

	ps := panels(r)
	plots := [][]*plot.Plot{{nil, nil}, {nil, nil}, {nil, nil}}
	for i, p := range ps {
		pl, err := p.plot()
		if err != nil {
			return err
		}
		plots[i/2][i%2] = pl
	}
	tiles := draw.Tiles{Rows: 3, Cols: 2, PadX: 0.4 * vg.Inch, PadY: 0.3 * vg.Inch,
		PadLeft: margin, PadRight: margin, PadBottom: margin}
	cs := plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -headH))
	for j := range plots {
		for i, pl := range plots[j] {
			pl.Draw(cs[j][i])
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("chart: encode png: %w", err)
	}
	return nil
}

func header(r *bench.Results) string {
	return fmt.Sprintf("aokeyd bench: %s, %d CPUs, %s, one listener, medians\n"+
		"targets: aokeyd/raw <= %.2f, sync/async delete >= %.0fx, planner at 10,000 peers < %v",
		r.Kernel, r.CPUs, r.Algorithm, bench.TargetRatio, bench.TargetSpeedup, bench.TargetPlan)
}

// panels builds the six panels in reading order (left to right, top to
// bottom): install, rotate, per delete, planner, revoke, daemon.
func panels(r *bench.Results) []panel {
	install, rotate := r.Comparisons()
	cmp := func(title string, cs []bench.Comparison) panel {
		p := panel{title: title, series: []series{{label: "raw loop", color: colRaw}, {label: "aokeyd", color: colAokeyd}}}
		for _, c := range cs {
			p.groups = append(p.groups, fmt.Sprintf("N=%d\n%s", c.N, note(fmt.Sprintf("ratio=%.2f", c.Ratio()), c.Ratio() <= bench.TargetRatio)))
			p.series[0].values = append(p.series[0].values, float64(c.Raw))
			p.series[1].values = append(p.series[1].values, float64(c.Aokeyd))
		}
		return p
	}
	del := panel{title: "2b. time per delete, same plan",
		series: []series{{label: "sync (sampled)", color: colSync}, {label: "del_async", color: colAsync}}}
	for _, d := range r.Deletes {
		del.groups = append(del.groups, fmt.Sprintf("N=%d\n%s", d.N, note(fmt.Sprintf("speedup=%.1f", d.Speedup()), d.Speedup() >= bench.TargetSpeedup)))
		del.series[0].values = append(del.series[0].values, float64(d.SyncDelMean))
		del.series[1].values = append(del.series[1].values, float64(d.AsyncSampleMean))
	}
	pl := panel{title: "4. planner alone (PlanAll), time per plan", series: []series{{label: "guest sweep", color: colAokeyd}}}
	for _, p := range r.Planner {
		pl.groups = append(pl.groups, fmt.Sprintf("%d peers\n%.1f allocs/peer", p.Peers, float64(p.AllocsPerOp)/float64(p.Peers)))
		pl.series[0].values = append(pl.series[0].values, float64(p.NsPerOp))
	}
	return []panel{cmp("1. install N peer keys", install), cmp("2. rotate all N peers", rotate), del, pl, revokePanel(r.Revoke), daemonPanel(r.Daemon)}
}

// note marks a figure that misses its target, as the table does.
func note(s string, met bool) string {
	if met {
		return s
	}
	return s + " MISSED"
}

func revokePanel(v *bench.RevokeRun) panel {
	if v == nil {
		return panel{title: "3. emergency revoke (aoctl): not run"}
	}
	return panel{title: fmt.Sprintf("3. revoke one key: %d sessions + listener", v.Peers),
		groups: []string{fmt.Sprintf("%d/%d sockets clean\n%s", v.KeyGone, v.Peers+1, v.Verdict())},
		series: []series{
			{label: "exec to last socket done", color: colAokeyd, values: []float64{float64(v.ToDone)}},
			{label: "exec to exit", color: colRaw, values: []float64{float64(v.Wall)}},
			{label: "daemon", color: colAsync, values: []float64{float64(v.Server)}},
		}}
}

func daemonPanel(v *bench.DaemonRun) panel {
	if v == nil {
		return panel{title: "5. daemon: not run"}
	}
	return panel{title: fmt.Sprintf("5. daemon, %d peers x %d keys: RSS %s (%s)", v.Peers, v.KeysPerPeer, bench.Bytes(v.RSSDaemon), v.RSSVerdict()),
		groups: []string{"idle pass\n" + bench.PassVerdict(v.IdlePassCPU), "full pass", "change pass", "steady CPU per s"},
		series: []series{
			{label: "CPU per pass", color: colAokeyd, values: []float64{float64(v.IdlePassCPU), float64(v.FullPassCPU), float64(v.ChangePassCPU), 0}},
			{label: "idle CPU per second", color: colRaw, values: []float64{0, 0, 0, float64(v.SteadyCPUPerSec)}},
		}}
}

// sans is Liberation Sans (gonum/plot's fonts) at size points.
func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// headroom is the share of the value axis, in decades of the bars' span,
// kept free above the tallest bar for its value and the legend.
const headroom = 0.5

// plot lays p out: nominal x, log y from the decade below the smallest bar,
// decade grid lines labelled as durations, and a legend at the top left.
func (p panel) plot() (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.title
	pl.Title.Padding = 0.1 * vg.Inch
	pl.Title.TextStyle.Font = sans(13)
	pl.X.Tick.Label.Font = sans(11)
	pl.Y.Tick.Label.Font = sans(11)
	pl.Legend.TextStyle.Font = sans(11)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		pl.HideAxes()
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{}}, Labels: []string{"no data"}})
		if err != nil {
			return nil, err
		}
		l.TextStyle[0].Color = colMiss
		pl.Add(l)
		return pl, nil
	}
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	pl.Add(grid, &bars{groups: len(p.groups), series: p.series})
	pl.NominalX(p.groups...)
	pl.Y.Padding = 0 // NominalX pads for its first label; the groups' margins leave room
	pl.X.Min, pl.X.Max = -0.5, float64(len(p.groups))-0.5
	pl.Y.Scale = plot.LogScale{}
	pl.Y.Tick.Marker = plot.TickerFunc(decades)
	pl.Y.Min = math.Pow(10, math.Floor(math.Log10(lo/2)))
	pl.Y.Max = hi * math.Pow(10, headroom*(math.Log10(hi)-math.Log10(pl.Y.Min)))
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Legend.XOffs, pl.Legend.YOffs = 0.1*vg.Inch, -0.05*vg.Inch
	pl.Legend.Padding = 0.04 * vg.Inch
	for _, s := range p.series {
		pl.Legend.Add(s.label, swatch{s.color})
	}
	return pl, nil
}

// decades ticks a log axis: a labelled major tick at every power of ten in
// [lo, hi], an unlabelled minor one at its multiples 2 to 9.
func decades(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
		base := math.Pow(10, d)
		for m := 1.0; m < 10; m++ {
			v := m * base
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 {
				t.Label = bench.Dur(int64(math.Round(v)))
			}
			out = append(out, t)
		}
	}
	return out
}

// bars draws grouped bars from the foot of the value axis (a log axis has
// no zero, so plotter.BarChart, which starts its bars at 0, cannot), the
// bars of each group centred on it, each labelled with its value.
type bars struct {
	groups int
	series []series
}

func (b *bars) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	lbl := plt.Y.Tick.Label
	lbl.XAlign, lbl.YAlign = draw.XCenter, draw.YBottom
	slot := 0.8 / float64(max(b.widest(), 1))
	for g := range b.groups {
		var here []series
		for _, s := range b.series {
			if g < len(s.values) && s.values[g] > 0 {
				here = append(here, s)
			}
		}
		x := float64(g) - slot*float64(len(here))/2
		for _, s := range here {
			v := s.values[g]
			x0, x1 := trX(x+0.05*slot), trX(x+0.95*slot)
			y0, y1 := trY(plt.Y.Min), trY(v)
			c.FillPolygon(s.color, c.ClipPolygonY([]vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}))
			c.FillText(lbl, vg.Point{X: (x0 + x1) / 2, Y: y1 + 2}, bench.Dur(int64(math.Round(v))))
			x += slot
		}
	}
}

// widest is the most bars any group has.
func (b *bars) widest() int {
	n := 0
	for g := range b.groups {
		k := 0
		for _, s := range b.series {
			if g < len(s.values) && s.values[g] > 0 {
				k++
			}
		}
		n = max(n, k)
	}
	return n
}

// DataRange makes the plot span every group and every bar's value.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, s := range b.series {
		for _, v := range s.values {
			if v > 0 {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
	}
	return -0.5, float64(b.groups) - 0.5, ymin, ymax
}

// swatch is a legend entry's filled square.
type swatch struct{ color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.Color, c.ClipPolygonY([]vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y},
	}))
}
