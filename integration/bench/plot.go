package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// Chart geometry and colours.
const (
	chartW, chartH = 1400, 1380
	scale          = 2 // font pixels per glyph dot
	charW          = 6 * scale
	lineH          = 9 * scale
)

// Colours (functions, so that the package holds no mutable state).
func colBG() color.RGBA     { return color.RGBA{255, 255, 255, 255} }
func colInk() color.RGBA    { return color.RGBA{20, 20, 20, 255} }
func colGrid() color.RGBA   { return color.RGBA{220, 220, 220, 255} }
func colRaw() color.RGBA    { return color.RGBA{150, 150, 150, 255} }
func colAokeyd() color.RGBA { return color.RGBA{40, 110, 200, 255} }
func colSync() color.RGBA   { return color.RGBA{210, 60, 50, 255} }
func colAsync() color.RGBA  { return color.RGBA{40, 160, 80, 255} }
func colMiss() color.RGBA   { return color.RGBA{200, 30, 30, 255} }

type bar struct {
	v   float64 // nanoseconds (or any unit the panel formats)
	col color.RGBA
	lbl string
}

type group struct {
	name  string
	bars  []bar
	note  string
	noted color.RGBA
}

type panel struct {
	title  string
	legend []bar
	groups []group
	unit   func(float64) string
}

type canvas struct{ img *image.RGBA }

func (c canvas) rect(x0, y0, x1, y1 int, col color.RGBA) {
	for y := max(y0, 0); y < min(y1, chartH); y++ {
		for x := max(x0, 0); x < min(x1, chartW); x++ {
			c.img.SetRGBA(x, y, col)
		}
	}
}

func (c canvas) text(x, y int, s string, col color.RGBA) {
	for _, r := range s {
		g := glyph(r)
		for row, bits := range g {
			for colx := range 5 {
				if bits&(1<<(4-colx)) != 0 {
					c.rect(x+colx*scale, y+row*scale, x+(colx+1)*scale, y+(row+1)*scale, col)
				}
			}
		}
		x += charW
	}
}

func (c canvas) textCentered(cx, y int, s string, col color.RGBA) {
	c.text(cx-len([]rune(s))*charW/2, y, s, col)
}

// draw renders one panel with a log10 value axis into the box.
func (c canvas) draw(p panel, x0, y0, x1, y1 int) {
	c.text(x0, y0, p.title, colInk())
	lx := x0
	for _, l := range p.legend {
		c.rect(lx, y0+lineH+2, lx+14, y0+lineH+16, l.col)
		c.text(lx+20, y0+lineH+2, l.lbl, colInk())
		lx += 20 + (len(l.lbl)+2)*charW
	}
	top, bottom := y0+2*lineH+30, y1-2*lineH-6
	left, right := x0+11*charW, x1-10
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range p.groups {
		for _, b := range g.bars {
			if b.v > 0 {
				lo, hi = math.Min(lo, b.v), math.Max(hi, b.v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		c.text(left, top, "NO DATA", colMiss())
		return
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	ypos := func(v float64) int {
		f := (math.Log10(v) - dlo) / (dhi - dlo)
		return bottom - int(f*float64(bottom-top))
	}
	for d := dlo; d <= dhi; d++ {
		y := ypos(math.Pow(10, d))
		c.rect(left, y, right, y+1, colGrid())
		lbl := p.unit(math.Pow(10, d))
		c.text(left-len(lbl)*charW-6, y-lineH/2+2, lbl, colInk())
	}
	c.rect(left, top, left+1, bottom, colInk())
	c.rect(left, bottom, right, bottom+1, colInk())
	gw := (right - left) / max(len(p.groups), 1)
	for gi, g := range p.groups {
		gx := left + gi*gw
		bw := min((gw-30)/max(len(g.bars), 1), 110)
		bx := gx + (gw-bw*len(g.bars))/2
		for _, b := range g.bars {
			if b.v > 0 {
				y := ypos(b.v)
				c.rect(bx+4, y, bx+bw-4, bottom, b.col)
				c.textCentered(bx+bw/2, y-lineH, p.unit(b.v), colInk())
			}
			bx += bw
		}
		c.textCentered(gx+gw/2, bottom+6, g.name, colInk())
		if g.note != "" {
			c.textCentered(gx+gw/2, bottom+6+lineH, g.note, g.noted)
		}
	}
}

func nsUnit(v float64) string { return durUnit(int64(v), "us") }

func ratioNote(r float64) (string, color.RGBA) {
	s := fmt.Sprintf("ratio=%.2f", r)
	if r > TargetRatio {
		return s, colMiss()
	}
	return s, colInk()
}

// WritePNG draws the report as a chart: install, rotation, per-delete cost
// and the planner, each on a log scale with its value on every bar.
func WritePNG(w io.Writer, r *Results) error {
	img := image.NewRGBA(image.Rect(0, 0, chartW, chartH))
	c := canvas{img}
	c.rect(0, 0, chartW, chartH, colBG())
	c.text(20, 14, fmt.Sprintf("AOKEYD BENCH: %s, %d CPUS, %s, ONE LISTENER, MEDIANS", r.Kernel, r.CPUs, r.Algorithm), colInk())
	c.text(20, 14+lineH, fmt.Sprintf("TARGETS: AOKEYD/RAW <= %.2f, SYNC/ASYNC DELETE >= %.0fX, PLANNER 10K PEERS < %v", TargetRatio, TargetSpeedup, TargetPlan), colInk())
	legend := []bar{{col: colRaw(), lbl: "RAW LOOP"}, {col: colAokeyd(), lbl: "AOKEYD"}}
	install, rotate := r.Comparisons()
	mk := func(title string, cs []Comparison) panel {
		p := panel{title: title, legend: legend, unit: nsUnit}
		for _, x := range cs {
			note, col := ratioNote(x.Ratio())
			p.groups = append(p.groups, group{name: fmt.Sprintf("N=%d", x.N), note: note, noted: col,
				bars: []bar{{v: float64(x.Raw), col: colRaw()}, {v: float64(x.Aokeyd), col: colAokeyd()}}})
		}
		return p
	}
	del := panel{title: "2B. TIME PER DELETE, SAME PLAN", unit: nsUnit,
		legend: []bar{{col: colSync(), lbl: "SYNC (SAMPLED)"}, {col: colAsync(), lbl: "DEL_ASYNC"}}}
	for _, d := range r.Deletes {
		col := colInk()
		if d.Speedup() < TargetSpeedup {
			col = colMiss()
		}
		del.groups = append(del.groups, group{name: fmt.Sprintf("N=%d", d.N), note: fmt.Sprintf("speedup=%.1f", d.Speedup()), noted: col,
			bars: []bar{{v: float64(d.SyncDelMean), col: colSync()}, {v: float64(d.AsyncSampleMean), col: colAsync()}}})
	}
	pl := panel{title: "4. PLANNER ALONE (PLANALL), TIME PER PLAN", unit: nsUnit, legend: []bar{{col: colAokeyd(), lbl: "GUEST SWEEP"}}}
	for _, p := range r.Planner {
		pl.groups = append(pl.groups, group{name: fmt.Sprintf("%d PEERS", p.Peers), note: fmt.Sprintf("%.1f ALLOCS/PEER", float64(p.AllocsPerOp)/float64(p.Peers)), noted: colInk(),
			bars: []bar{{v: float64(p.NsPerOp), col: colAokeyd()}}})
	}
	const top = 70
	row := (chartH - top) / 3
	mid, y1, y2 := chartW/2, top+row, top+2*row
	c.draw(mk("1. INSTALL N PEER KEYS", install), 20, top, mid-20, y1-10)
	c.draw(mk("2. ROTATE ALL N PEERS", rotate), mid+20, top, chartW-20, y1-10)
	c.draw(del, 20, y1+10, mid-20, y2-10)
	c.draw(pl, mid+20, y1+10, chartW-20, y2-10)
	c.draw(revokePanel(r.Revoke), 20, y2+10, mid-20, chartH-10)
	c.draw(daemonPanel(r.Daemon), mid+20, y2+10, chartW-20, chartH-10)
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("bench: encode png: %w", err)
	}
	return nil
}

func verdictCol(v string) color.RGBA {
	if strings.Contains(v, "met") {
		return colInk()
	}
	return colMiss()
}

func revokePanel(v *RevokeRun) panel {
	p := panel{title: "3. EMERGENCY REVOKE (AOCTL), NOT RUN", unit: nsUnit}
	if v == nil {
		return p
	}
	p.title = fmt.Sprintf("3. REVOKE ONE KEY: %d SESSIONS + LISTENER", v.Peers)
	p.legend = []bar{{col: colAokeyd(), lbl: "EXEC TO LAST SOCKET DONE"}, {col: colRaw(), lbl: "EXEC TO EXIT"}, {col: colAsync(), lbl: "DAEMON"}}
	verdict := strings.ToUpper(v.Verdict())
	p.groups = []group{{name: fmt.Sprintf("%d/%d SOCKETS CLEAN", v.KeyGone, v.Peers+1), note: verdict, noted: verdictCol(v.Verdict()),
		bars: []bar{{v: float64(v.ToDone), col: colAokeyd()}, {v: float64(v.Wall), col: colRaw()}, {v: float64(v.Server), col: colAsync()}}}}
	return p
}

func daemonPanel(v *DaemonRun) panel {
	p := panel{title: "5. DAEMON, NOT RUN", unit: nsUnit}
	if v == nil {
		return p
	}
	p.title = fmt.Sprintf("5. DAEMON %d PEERS X %d KEYS: RSS %s (%s)", v.Peers, v.KeysPerPeer, strings.ToUpper(bytesText(v.RSSDaemon)), strings.ToUpper(v.RSSVerdict()))
	p.legend = []bar{{col: colAokeyd(), lbl: "CPU PER PASS"}, {col: colRaw(), lbl: "IDLE CPU PER SECOND"}}
	p.groups = []group{
		{name: "IDLE PASS", note: strings.ToUpper(PassVerdict(v.IdlePassCPU)), noted: verdictCol(PassVerdict(v.IdlePassCPU)),
			bars: []bar{{v: float64(v.IdlePassCPU), col: colAokeyd()}}},
		{name: "FULL PASS", bars: []bar{{v: float64(v.FullPassCPU), col: colAokeyd()}}},
		{name: "CHANGE PASS", bars: []bar{{v: float64(v.ChangePassCPU), col: colAokeyd()}}},
		{name: "STEADY CPU PER S", bars: []bar{{v: float64(v.SteadyCPUPerSec), col: colRaw()}}},
	}
	return p
}
