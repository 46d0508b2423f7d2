package benchutil

import (
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Colors of the figures' lines, in the order series take them.
var (
	Blue    = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	Orange  = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	Green   = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	Purple  = color.RGBA{R: 148, G: 103, B: 189, A: 255}
	Brown   = color.RGBA{R: 140, G: 86, B: 75, A: 255}
	Grey    = color.RGBA{R: 127, G: 127, B: 127, A: 255}
	Red     = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	Palette = []color.Color{Blue, Orange, Green, Purple, Brown, Grey}
)

// NewPlot is a panel with a title, axis labels, a grid and the legend at the top right.
func NewPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

// AddLine draws xys on p in c and names it in the legend (unless name is empty).
func AddLine(p *plot.Plot, name string, c color.Color, xys plotter.XYs) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

// Dashed draws a dashed segment from (x0, y0) to (x1, y1): a mark (an event, a reference level).
func Dashed(p *plot.Plot, c color.Color, x0, y0, x1, y1 float64) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y1}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	return nil
}

// Label writes text at (x, y).
func Label(p *plot.Plot, x, y float64, text string) error {
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{text}})
	if err != nil {
		return err
	}
	p.Add(lb)
	return nil
}

// SavePNG draws the panels as a grid (rows of columns), each panel w × h, into file.
func SavePNG(file string, rows [][]*plot.Plot, w, h vg.Length) error {
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	if cols == 0 {
		return nil
	}
	img := vgimg.New(w*vg.Length(cols), h*vg.Length(len(rows)))
	pad := vg.Points(6)
	tiles := draw.Tiles{Rows: len(rows), Cols: cols, PadX: 2 * pad, PadY: 2 * pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i, r := range rows {
		for j, p := range r {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
