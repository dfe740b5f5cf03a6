package cli

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// svgFloor is where a zero (1 − cosine or NMSE of identical records) is drawn
// on the logarithmic axis.
const svgFloor = 1e-16

// Labels of the SVG's series; the test finds them in the file.
const (
	svgCosLabel       = "1 - min cosine"
	svgNMSELabel      = "max NMSE"
	svgThresholdLabel = "1 - threshold"
	svgFirstLabel     = "first divergence"
)

// writeDiffSVG draws each (layer, op)'s worst 1 − cosine and NMSE along the
// computation order (logarithmic), the --min-cosine threshold and the first
// divergent stage, with one x tick per layer.
func writeDiffSVG(path string, rep diffReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s against %s, %d tokens", rep.Model, rep.Backend, rep.Against, len(rep.Tokens))
	p.X.Label.Text = "(layer, op) in computation order"
	p.Y.Label.Text = fmt.Sprintf("worst over positions (0 drawn at %g)", svgFloor)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: 1}
	floor := func(v float64) float64 { return max(v, svgFloor) }
	cos := make(plotter.XYs, len(rep.Stages))
	nmse := make(plotter.XYs, len(rep.Stages))
	var ticks []plot.Tick
	lastLayer := -2
	first := -1
	for i, s := range rep.Stages {
		cos[i] = plotter.XY{X: float64(i), Y: floor(1 - s.MinCosine)}
		nmse[i] = plotter.XY{X: float64(i), Y: floor(s.MaxNMSE)}
		if s.Layer != lastLayer {
			label := "out"
			if s.Layer >= 0 {
				label = fmt.Sprintf("L%d", s.Layer)
			} else if i == 0 {
				label = "in"
			}
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: label})
			lastLayer = s.Layer
		}
		if first < 0 && rep.First != nil && s.Layer == rep.First.Layer && s.Op == rep.First.Op {
			first = i
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	add := func(label string, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer) error {
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, pts.Color, pts.Shape = c, c, shape
		p.Add(l, pts)
		p.Legend.Add(label, l, pts)
		return nil
	}
	if len(rep.Stages) > 0 {
		if err := add(svgCosLabel, cos, color.RGBA{R: 31, G: 119, B: 180, A: 255}, draw.CircleGlyph{}); err != nil {
			return err
		}
		if err := add(svgNMSELabel, nmse, color.RGBA{R: 255, G: 127, B: 14, A: 255}, draw.TriangleGlyph{}); err != nil {
			return err
		}
		th, err := plotter.NewLine(plotter.XYs{{X: 0, Y: floor(1 - rep.MinCosine)}, {X: float64(len(rep.Stages) - 1), Y: floor(1 - rep.MinCosine)}})
		if err != nil {
			return err
		}
		th.Color, th.Dashes = color.RGBA{R: 214, G: 39, B: 40, A: 255}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(th)
		p.Legend.Add(svgThresholdLabel, th)
	}
	if first >= 0 {
		ymax := svgFloor
		for i := range cos {
			ymax = max(ymax, cos[i].Y, nmse[i].Y)
		}
		v, err := plotter.NewLine(plotter.XYs{{X: float64(first), Y: svgFloor}, {X: float64(first), Y: ymax}})
		if err != nil {
			return err
		}
		v.Color, v.Width = color.RGBA{R: 148, G: 103, B: 189, A: 255}, vg.Points(2)
		p.Add(v)
		p.Legend.Add(fmt.Sprintf("%s: layer %d %s", svgFirstLabel, rep.First.Layer, rep.First.Op), v)
	}
	p.Legend.Top = true
	w, err := p.WriterTo(10*vg.Inch, 5*vg.Inch, map[bool]string{true: "png", false: "svg"}[os.Getenv("X_PNG") != ""])
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return badInput(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
