package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlots writes the PNG plots of res into dir (the files plotFiles
// lists; a figure without data is skipped).
func WritePlots(dir string, res *Results) error {
	type fig struct {
		file string
		make func() (*plot.Plot, bool, error)
	}
	figs := []fig{
		{"fig14_sharing_overhead.png", func() (*plot.Plot, bool, error) {
			return overheadPlot(res, SecScheme2, "Scheme II: sharing phase vs no hook")
		}},
		{"fig15_profiling_overhead.png", func() (*plot.Plot, bool, error) {
			return overheadPlot(res, SecScheme3, "Scheme III: profiling phase vs no hook")
		}},
		{"fig16_hp_speedup.png", func() (*plot.Plot, bool, error) {
			return pairBars(res, SecPair, "HP JCT speedup, fikit over default sharing (p50)", "speedup (×)", 1,
				series{"measured", func(d *Derived) float64 { return d.Speedup }},
				series{"simulator", func(d *Derived) float64 { return d.SimSpeedup }})
		}},
		{"fig17_lp_speedup.png", func() (*plot.Plot, bool, error) {
			return pairBars(res, SecPair, "LP JCT speedup, fikit over default sharing (p50)", "speedup (×)", 1,
				series{"measured", func(d *Derived) float64 { return d.LPSpeedup }})
		}},
		{"fig18_lp_vs_exclusive.png", func() (*plot.Plot, bool, error) { return ratioPlot(res) }},
		{"fig19_preempt_hp_speedup.png", func() (*plot.Plot, bool, error) {
			return pairBars(res, SecPreempt, "HP JCT speedup with preemption, fikit over sharing", "speedup (×)", 1,
				series{"mean JCT", func(d *Derived) float64 { return d.SpeedupMean }},
				series{"p50 JCT", func(d *Derived) float64 { return d.Speedup }},
				series{"simulator p50", func(d *Derived) float64 { return d.SimSpeedup }})
		}},
		{"fig20_preempt_lp.png", func() (*plot.Plot, bool, error) {
			return pairBars(res, SecPreempt, "LP JCT with preemption, default sharing over fikit (p50)", "ratio", 1,
				series{"measured", func(d *Derived) float64 { return d.LPSpeedup }})
		}},
		{"fig21_lp_cv.png", func() (*plot.Plot, bool, error) { return cvPlot(res) }},
		{"hp_vs_alone.png", func() (*plot.Plot, bool, error) {
			return pairBars(res, SecPair, "HP p50 JCT over HP alone", "× alone", 1,
				series{"default sharing", func(d *Derived) float64 { return d.HPVsAloneP50[ModeSharing] }},
				series{"fikit", func(d *Derived) float64 { return d.HPVsAloneP50[ModeFikit] }},
				series{"fikit, LP on another device", func(d *Derived) float64 { return d.HPVsAloneP50[ModeFikitCPU] }},
				series{"fikit (simulator)", func(d *Derived) float64 { return d.SimHPVsAloneP50[ModeFikit] }})
		}},
		{"sensitivity.png", func() (*plot.Plot, bool, error) { return sensitivityPlot(res) }},
	}
	for _, f := range figs {
		p, ok, err := f.make()
		if err != nil {
			return fmt.Errorf("plot %s: %w", f.file, err)
		}
		if !ok {
			continue
		}
		if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, f.file)); err != nil {
			return fmt.Errorf("plot %s: %w", f.file, err)
		}
	}
	return nil
}

type series struct {
	name string
	val  func(*Derived) float64
}

// short names a pair or a trace for an axis label: "r50+bert".
func short(name string) string {
	r := strings.NewReplacer(" (H)", "", " (L)", "", " + ", "+", "h100/", "", "v100/", "", "_4_fwd", "", "_2_fwd", "",
		"_inf_bs4", "", "transformer_xl", "txl", "transformer", "tfm", "resnet", "r", "mobilenetv2", "mnv2", "mobilenet", "mn")
	s := r.Replace(name)
	if strings.Contains(name, "v100/") {
		s += " (V100)"
	}
	return s
}

func newPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p
}

// groupedBars adds one bar series per values slice, side by side per label,
// and a dashed reference line at ref (0: none).
func groupedBars(p *plot.Plot, labels []string, names []string, vals [][]float64, ref float64) error {
	w := vg.Points(math.Max(6, math.Min(20, 240/float64(len(labels)*len(vals)))))
	for i, v := range vals {
		b, err := plotter.NewBarChart(plotter.Values(v), w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(vals)-1)/2)
		p.Add(b)
		if len(vals) > 1 {
			p.Legend.Add(names[i], b)
		}
	}
	if ref != 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: ref}, {X: float64(len(labels)) - 0.5, Y: ref}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	p.NominalX(labels...)
	p.Y.Min = 0
	// Headroom above the tallest bar for the legend.
	top := ref
	for _, v := range vals {
		top = math.Max(top, hi(v))
	}
	if len(vals) > 1 {
		p.Y.Max = top * (1.15 + 0.08*float64(len(vals)))
	}
	return nil
}

func pairBars(res *Results, sec, title, ylabel string, ref float64, ss ...series) (*plot.Plot, bool, error) {
	var labels []string
	vals := make([][]float64, len(ss))
	for _, sc := range sections(res, sec) {
		if sc.Error != "" || sc.Derived == nil {
			continue
		}
		labels = append(labels, short(sc.Name))
		for i, s := range ss {
			vals[i] = append(vals[i], finite(s.val(sc.Derived)))
		}
	}
	if len(labels) == 0 {
		return nil, false, nil
	}
	p := newPlot(title, ylabel)
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.name
	}
	return p, true, groupedBars(p, labels, names, vals, ref)
}

func overheadPlot(res *Results, sec, title string) (*plot.Plot, bool, error) {
	var labels []string
	var v, noise []float64
	for _, sc := range sections(res, sec) {
		if sc.Overhead == nil {
			continue
		}
		labels = append(labels, short(sc.Name))
		v = append(v, sc.Overhead.PctP50)
		noise = append(noise, sc.Overhead.NoisePct)
	}
	if len(labels) == 0 {
		return nil, false, nil
	}
	p := newPlot(title, "JCT increase (%)")
	err := groupedBars(p, labels, []string{"overhead (p50)", "noise floor"}, [][]float64{v, noise}, 0)
	p.Y.Min = math.Min(0, lo(v))
	return p, true, err
}

func ratioPlot(res *Results) (*plot.Plot, bool, error) {
	p := newPlot("LP JCT: exclusive over fikit, by HP:LP task ratio", "exclusive / fikit")
	p.X.Tick.Label.Rotation = 0
	p.X.Tick.Label.XAlign = draw.XCenter
	p.X.Label.Text = "HP tasks per LP task"
	n := 0
	for _, sc := range sections(res, SecRatio) {
		var xys plotter.XYs
		for _, pt := range sc.Ratio {
			xys = append(xys, plotter.XY{X: float64(pt.K), Y: finite(pt.Speedup)})
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, false, err
		}
		l.Color, s.Color = plotutil.Color(n), plotutil.Color(n)
		p.Add(l, s)
		p.Legend.Add(short(sc.Name), l, s)
		n++
	}
	if n > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}, {X: 50, Y: 1}})
		if err != nil {
			return nil, false, err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	p.Legend.Left = true
	p.Y.Min = 0
	return p, n > 0, nil
}

func cvPlot(res *Results) (*plot.Plot, bool, error) {
	var labels []string
	vals := make([][]float64, 3)
	for _, sc := range sections(res, SecStability) {
		if sc.Error != "" || len(sc.Modes) < 3 {
			continue
		}
		labels = append(labels, short(sc.Name))
		for i, m := range []string{ModeExclusive, ModeSharing, ModeFikit} {
			vals[i] = append(vals[i], finite(sc.Mode(m).LP.CV))
		}
	}
	if len(labels) == 0 {
		return nil, false, nil
	}
	p := newPlot("LP JCT coefficient of variation, HP continuous (target ≤ 0.10)", "CV")
	return p, true, groupedBars(p, labels, []string{"LP alone", "default sharing", "fikit"}, vals, 0.10)
}

func sensitivityPlot(res *Results) (*plot.Plot, bool, error) {
	var labels []string
	vals := make([][]float64, 2)
	for _, sc := range sections(res, SecSensitivity) {
		if sc.Error != "" || sc.Derived == nil {
			continue
		}
		labels = append(labels, short(sc.Name)+" "+shortVariant(sc.Variant))
		vals[0] = append(vals[0], finite(sc.Derived.HPVsAloneP50[ModeSharing]))
		vals[1] = append(vals[1], finite(sc.Derived.HPVsAloneP50[ModeFikit]))
	}
	if len(labels) == 0 {
		return nil, false, nil
	}
	p := newPlot("HP p50 JCT over alone under each device assumption", "× alone")
	return p, true, groupedBars(p, labels, []string{"default sharing", "fikit"}, vals, 1)
}

func shortVariant(v string) string {
	v = strings.TrimSuffix(v, " (default)")
	return strings.NewReplacer("timeslice, ", "", "switch ", "sw ", " µs", "µs").Replace(v)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
