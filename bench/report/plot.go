package report

import (
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
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

// A figure is FigureWidth wide at FigureDPI: 1600 pixels, whose text stays readable when the figure
// is shown at the width of a page.
const (
	FigureWidth = 8 * vg.Inch
	FigureDPI   = 200
)

// NewPlot is a panel with a title, axis labels and a grid.
func NewPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// RatioAxis marks p's Y axis as a ratio's: 1 labelled and no tick above it, where the axis only
// makes room for the events' labels.
func RatioAxis(p *plot.Plot) { p.Y.Tick.Marker = plainTicks{upTo: 1} }

// plainTicks are gonum's default ticks labelled without trailing zeros (5000, not 5000.00), none
// above upTo when it is set.
type plainTicks struct{ upTo float64 }

func (t plainTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, tk := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.upTo != 0 && tk.Value > t.upTo+1e-9 {
			continue
		}
		if tk.Label != "" { // rounded: a tick's value may carry float noise (0.8500000000000001)
			tk.Label = strconv.FormatFloat(math.Round(tk.Value*1e6)/1e6, 'f', -1, 64)
		}
		out = append(out, tk)
	}
	if t.upTo != 0 && !slices.ContainsFunc(out, func(tk plot.Tick) bool { return tk.Label != "" && tk.Value == t.upTo }) {
		out = append(out, plot.Tick{Value: t.upTo, Label: strconv.FormatFloat(t.upTo, 'f', -1, 64)})
	}
	return out
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

// Dashed draws a dashed segment from (x0, y0) to (x1, y1), a mark (an event, a reference level), and
// names it in the legend (unless name is empty: a kind of mark is named once).
func Dashed(p *plot.Plot, name string, c color.Color, x0, y0, x1, y1 float64) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y1}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

// Label writes text hanging from (x, y), to its right.
func Label(p *plot.Plot, x, y float64, s string) error {
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{s}})
	if err != nil {
		return err
	}
	lb.TextStyle[0].YAlign = text.YTop
	lb.TextStyle[0].Font.Size = vg.Points(10)
	p.Add(lb)
	return nil
}

// SavePNG draws the panels stacked top to bottom into file, FigureWidth wide and panelH per panel,
// their data areas aligned, the time axis labelled once at the bottom, each panel's legend beside it
// on the right, off the data.
func SavePNG(file string, panels []*plot.Plot, panelH vg.Length) error {
	if len(panels) == 0 {
		return nil
	}
	img := vgimg.NewWith(vgimg.UseWH(FigureWidth, panelH*vg.Length(len(panels))), vgimg.UseDPI(FigureDPI))
	dc := draw.New(img)
	pad := vg.Points(8)
	var legendW vg.Length
	legends := make([]plot.Legend, len(panels))
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		legends[i] = p.Legend
		legends[i].TextStyle.Font.Size = vg.Points(10)
		legendW = max(legendW, legends[i].Rectangle(dc).Size().X)
		p.Legend = plot.NewLegend() // drawn beside the panel instead
		rows[i] = []*plot.Plot{p}
		if i < len(panels)-1 {
			p.X.Label.Text = ""
		}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: 2 * pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: legendW + 2*pad}
	for i, c := range plot.Align(rows, tiles, dc) {
		p := panels[i]
		p.Draw(c[0])
		lc := c[0]
		lc.Min.X, lc.Max.X = c[0].Max.X+pad, c[0].Max.X+pad+legendW
		lc.Max.Y -= p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
		legends[i].Top, legends[i].Left = true, true
		legends[i].Draw(lc)
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
