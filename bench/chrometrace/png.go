package chrometrace

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/fikit/fikit/daemon/decisions"
	"github.com/fikit/fikit/simgpu/timeline"
)

// Colours of the PNG: kernels by priority (green the best, orange the
// usual low priority), as in the JSON's colour names where they exist.
var (
	prioRGB = [10]color.RGBA{
		{44, 160, 44, 255}, {152, 223, 138, 255}, {23, 190, 207, 255}, {31, 119, 180, 255}, {148, 103, 189, 255},
		{255, 127, 14, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {188, 189, 34, 255}, {127, 127, 127, 255},
	}
	unknownRGB = color.RGBA{160, 160, 160, 255}
	blockedRGB = color.RGBA{214, 39, 40, 255}
	windowRGB  = color.RGBA{174, 199, 232, 255}
	actualRGB  = color.RGBA{90, 140, 210, 255}
	idleRGB    = color.RGBA{220, 220, 220, 255}
	runRGB     = color.RGBA{110, 110, 110, 255}
	grantRGB   = color.RGBA{0, 0, 0, 255}
	stopRGB    = color.RGBA{148, 0, 211, 255}
)

func rgbOf(prio int) color.RGBA {
	if prio < 0 || prio >= len(prioRGB) {
		return unknownRGB
	}
	return prioRGB[prio]
}

// PNG draws [from, to] (CLOCK_MONOTONIC ns) of a timeline and its decision
// record to path: one lane per process and stream, kernels as boxes coloured
// by priority with their blocked time as a red bar below, each process's
// runs as a thin bar above; a lane for the daemon with its predicted windows
// (the part before the holder's actual return darker), idle periods, grants
// (triangles) and early stops (red ticks). opt.From and opt.To are ignored.
func PNG(path string, recs []timeline.Record, decs []decisions.Record, from, to int64, opt Options) error {
	if to <= from {
		return fmt.Errorf("png: empty span [%d, %d]", from, to)
	}
	opt.From, opt.To = from, to
	m := newModel(recs, decs)
	ms := func(ns int64) float64 { return float64(ns-from) / 1e6 }

	// Lanes, top to bottom: processes by priority, their streams in order,
	// then the daemon.
	type laneKey struct{ pid, tid int }
	used := map[laneKey]bool{}
	for _, r := range recs {
		if opt.in(r.StartNs, r.EndNs) {
			used[laneKey{r.PID, streamTID(r.Ctx, r.Stream)}] = true
		}
	}
	var lanes []string
	index := map[laneKey]int{}
	firstLane := map[int]int{}
	prioOfLane := []int{}
	for _, p := range m.sortedProcs() {
		var tids []int
		for k := range used {
			if k.pid == p.pid {
				tids = append(tids, k.tid)
			}
		}
		sort.Ints(tids)
		for _, tid := range tids {
			label := p.label()
			if len(tids) > 1 {
				label += fmt.Sprintf(" s%d", (tid-1)%1000)
			}
			if _, ok := firstLane[p.pid]; !ok {
				firstLane[p.pid] = len(lanes)
			}
			index[laneKey{p.pid, tid}] = len(lanes)
			lanes = append(lanes, label)
			prioOfLane = append(prioOfLane, p.prio)
		}
	}
	daemonLane := -1
	if len(decs) > 0 {
		daemonLane = len(lanes)
		lanes = append(lanes, "fikit daemon")
	}
	if len(lanes) == 0 {
		return errors.New("png: nothing in the span")
	}
	n := len(lanes)
	y := func(lane int) float64 { return float64(n - 1 - lane) } // lane 0 on top

	lp := &lanesPlot{xmax: ms(to), ymax: float64(n) - 0.5 + legendRoom}
	for _, r := range recs {
		if !opt.in(r.StartNs, r.EndNs) {
			continue
		}
		l := index[laneKey{r.PID, streamTID(r.Ctx, r.Stream)}]
		a, b := opt.clip(r.StartNs, r.EndNs)
		lp.boxes = append(lp.boxes, box{ms(a), ms(b), y(l) - 0.28, y(l) + 0.28, rgbOf(prioOfLane[l])})
		if r.BlockedNs > 0 && !opt.NoBlocked && opt.in(r.StartNs-r.BlockedNs, r.StartNs) {
			a, b := opt.clip(r.StartNs-r.BlockedNs, r.StartNs)
			lp.boxes = append(lp.boxes, box{ms(a), ms(b), y(l) - 0.42, y(l) - 0.32, blockedRGB})
		}
	}
	for _, r := range allRuns(decs, m) {
		l, ok := firstLane[r.PID]
		if !ok || !opt.in(r.Start, r.End) {
			continue
		}
		a, b := opt.clip(r.Start, r.End)
		lp.boxes = append(lp.boxes, box{ms(a), ms(b), y(l) + 0.34, y(l) + 0.39, runRGB})
	}
	if daemonLane >= 0 {
		yd := y(daemonLane)
		for _, ip := range idlePeriods(decs) {
			end := ip.end
			if end == 0 {
				end = to
			}
			if opt.in(ip.start, end) {
				a, b := opt.clip(ip.start, end)
				lp.boxes = append(lp.boxes, box{ms(a), ms(b), yd - 0.3, yd + 0.3, idleRGB})
			}
		}
		for _, w := range windows(decs) {
			if !opt.in(w.start, w.end) {
				continue
			}
			a, b := opt.clip(w.start, w.end)
			lp.boxes = append(lp.boxes, box{ms(a), ms(b), yd - 0.3, yd + 0.3, windowRGB})
			if w.closedAt > w.start && w.closedAt < w.end && opt.in(w.start, w.closedAt) {
				a, b := opt.clip(w.start, w.closedAt)
				lp.boxes = append(lp.boxes, box{ms(a), ms(b), yd - 0.3, yd + 0.3, actualRGB})
			}
		}
		for _, d := range decs {
			if !opt.in(d.T, d.T) {
				continue
			}
			switch {
			case d.Kind == decisions.KindGrant:
				lp.marks = append(lp.marks, mark{ms(d.T), yd + 0.15, markGrant})
			case d.Kind == decisions.KindWindowEnd && d.Reason == "early_stop":
				lp.marks = append(lp.marks, mark{ms(d.T), yd, markStop})
			}
		}
	}

	p := plot.New()
	p.Title.Text = opt.Title
	if p.Title.Text == "" {
		p.Title.Text = "fikit: kernels on the GPU (simgpu timeline) and the daemon's decisions"
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = fmt.Sprintf("ms from %d ns (CLOCK_MONOTONIC)", from)
	p.X.Min, p.X.Max = 0, lp.xmax
	p.X.Tick.Marker = msTicks{}
	p.Y.Min, p.Y.Max = -0.5, lp.ymax
	var ticks plot.ConstantTicks
	for i, l := range lanes {
		ticks = append(ticks, plot.Tick{Value: y(i), Label: l})
	}
	p.Y.Tick.Marker = ticks
	p.Y.Tick.Length = 0
	p.Y.Tick.Label.Font.Size = vg.Points(10.5)
	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil
	grid.Vertical.Color = color.Gray{Y: 225}
	p.Add(grid, lp)
	seen := map[int]bool{}
	for _, pr := range prioOfLane {
		if seen[pr] {
			continue
		}
		seen[pr] = true
		name := fmt.Sprintf("priority %d kernels", pr)
		if pr < 0 {
			name = "kernels (priority unknown)"
		}
		lp.legend = append(lp.legend, legendItem{name, rgbOf(pr), markNone})
	}
	// The rest only where the span shows it.
	shown := map[color.RGBA]bool{}
	for _, b := range lp.boxes {
		shown[b.c] = true
	}
	marks := map[markKind]bool{}
	for _, mk := range lp.marks {
		marks[mk.kind] = true
	}
	for _, it := range []legendItem{
		{"blocked by other contexts", blockedRGB, markNone}, {"run", runRGB, markNone},
		{"predicted window", windowRGB, markNone}, {"until the holder's return", actualRGB, markNone},
		{"holders idle", idleRGB, markNone}, {"grant", grantRGB, markGrant}, {"early stop", stopRGB, markStop},
	} {
		if (it.kind == markNone && shown[it.c]) || (it.kind != markNone && marks[it.kind]) {
			lp.legend = append(lp.legend, it)
		}
	}
	lp.textStyle = p.Legend.TextStyle
	lp.textStyle.Font.Size = vg.Points(8.5)

	w := 10 * vg.Inch
	h := vg.Length(1.3+0.42*float64(n)) * vg.Inch
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	p.Draw(draw.New(c))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("png: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("png: %w", err)
	}
	return f.Close()
}

// legendRoom is the space above the top lane (in lanes) for the legend row.
const legendRoom = 0.6

type box struct {
	x0, x1, y0, y1 float64
	c              color.RGBA
}

type markKind int

const (
	markNone markKind = iota
	markGrant
	markStop
)

type mark struct {
	x, y float64
	kind markKind
}

type legendItem struct {
	name string
	c    color.RGBA
	kind markKind
}

// lanesPlot is a plot.Plotter drawing boxes and marks in data coordinates
// (ms, lane) and a one-row legend above the lanes.
type lanesPlot struct {
	xmax, ymax float64
	boxes      []box
	marks      []mark
	legend     []legendItem
	textStyle  draw.TextStyle
}

func (l *lanesPlot) DataRange() (xmin, xmax, ymin, ymax float64) { return 0, l.xmax, -0.5, l.ymax }

func (l *lanesPlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	// A kernel shorter than a pixel still shows.
	minW := vg.Length(72.0 / 110)
	for _, b := range l.boxes {
		x0, x1 := trX(b.x0), trX(b.x1)
		if x1-x0 < minW {
			x1 = x0 + minW
		}
		y0, y1 := trY(b.y0), trY(b.y1)
		pts := c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if len(pts) > 0 {
			c.FillPolygon(b.c, pts)
		}
	}
	for _, mk := range l.marks {
		pt := vg.Point{X: trX(mk.x), Y: trY(mk.y)}
		if !c.ContainsX(pt.X) {
			continue
		}
		l.drawMark(c, mk.kind, pt, trY(mk.y+0.3)-trY(mk.y))
	}
	// The legend row, left to right above the top lane.
	ly := trY(l.ymax - legendRoom/2)
	x := c.Min.X + vg.Points(4)
	sw := vg.Points(9)
	for _, it := range l.legend {
		switch it.kind {
		case markNone:
			c.FillPolygon(it.c, []vg.Point{{X: x, Y: ly - sw/2}, {X: x + sw, Y: ly - sw/2}, {X: x + sw, Y: ly + sw/2}, {X: x, Y: ly + sw/2}})
		default:
			l.drawMark(c, it.kind, vg.Point{X: x + sw/2, Y: ly}, sw/2)
		}
		x += sw + vg.Points(3)
		ts := l.textStyle
		ts.YAlign = draw.YCenter
		c.FillText(ts, vg.Point{X: x, Y: ly}, it.name)
		x += ts.Width(it.name) + vg.Points(10)
	}
}

func (l *lanesPlot) drawMark(c draw.Canvas, kind markKind, pt vg.Point, half vg.Length) {
	switch kind {
	case markGrant:
		r := vg.Points(2.6)
		c.FillPolygon(grantRGB, []vg.Point{{X: pt.X - r, Y: pt.Y + r}, {X: pt.X + r, Y: pt.Y + r}, {X: pt.X, Y: pt.Y - r}})
	case markStop:
		c.StrokeLine2(draw.LineStyle{Color: stopRGB, Width: vg.Points(1.6)}, pt.X, pt.Y-half, pt.X, pt.Y+half)
	}
}

// msTicks marks about ten round values of milliseconds, so a span of a few
// ms can be read to a tenth.
type msTicks struct{}

func (msTicks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) {
		return nil
	}
	base, step := 1e-3, 1e-3
search:
	for {
		for _, m := range []float64{1, 2, 5} {
			if step = base * m; (max-min)/step <= 10 {
				break search
			}
		}
		base *= 10
	}
	prec := max0(-int(math.Floor(math.Log10(step) + 1e-9)))
	var ts []plot.Tick
	for i := math.Ceil(min/step - 1e-9); i*step <= max+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', prec, 64)})
		if minor := v + step/2; minor <= max {
			ts = append(ts, plot.Tick{Value: minor})
		}
	}
	return ts
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
