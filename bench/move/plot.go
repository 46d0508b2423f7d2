package move

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/shoaldb/shoal/bench/benchutil"
)

// logTruncateThreshold is the replica store's default LogTruncateThreshold (replica.Config, not
// exported there): a leader keeps between half of it and all of it of its applied log; a follower
// further behind needs a new snapshot.
const logTruncateThreshold = 4096

// writePlot draws the timeline: throughput, latency, snapshot send rate and the new replica's lag
// per second, stacked, with the move's start and end marked.
func writePlot(rep *Report, file string) error {
	rate := float64(rep.Settings.ConfiguredRateBytesSec) / (1 << 20)
	type series struct {
		name  string
		color color.Color
		value func(Point) float64
	}
	panels := []struct {
		title, ylabel string
		lines         []series
		ref           float64 // a dashed horizontal reference line when > 0
		snap          bool    // mark the snapshots the new node applied
	}{
		{"foreground throughput (95% reads, 5% updates)", "ops/s", []series{
			{"ops/s", benchutil.Blue, func(p Point) float64 { return p.OpsPerSec }}}, 0, false},
		{"foreground latency", "ms", []series{
			{"p50", benchutil.Blue, func(p Point) float64 { return p.P50Ms }},
			{"p99", benchutil.Orange, func(p Point) float64 { return p.P99Ms }}}, 0, false},
		{"snapshot bytes sent (dashed: configured rate)", "MiB/s", []series{
			{"snapshot MiB/s", benchutil.Green, func(p Point) float64 { return p.SnapshotBytesS / (1 << 20) }}}, rate, true},
		{"new replica's lag behind the leader (dashed: the leader's log truncation threshold)", "raft entries", []series{
			{"lag", benchutil.Red, func(p Point) float64 {
				if p.NewReplicaApplied == 0 || p.LeaderApplied < p.NewReplicaApplied {
					return 0
				}
				return float64(p.LeaderApplied - p.NewReplicaApplied)
			}}}, logTruncateThreshold, true},
	}
	xmax := 1.0
	if n := len(rep.Series); n > 0 {
		xmax = rep.Series[n-1].T
	}
	var rows []*plot.Plot
	for _, pn := range panels {
		p := benchutil.NewPlot(pn.title, "t (s)", pn.ylabel)
		p.X.Min, p.X.Max, p.Legend.Left = 0, xmax, true
		ymax := pn.ref
		for _, s := range pn.lines {
			var xys plotter.XYs
			for _, pt := range rep.Series {
				xys = append(xys, plotter.XY{X: pt.T, Y: s.value(pt)})
				ymax = max(ymax, s.value(pt))
			}
			if err := benchutil.AddLine(p, s.name, s.color, xys); err != nil {
				return err
			}
		}
		ymax = max(ymax, 1) * 1.1
		p.Y.Min, p.Y.Max = 0, ymax
		if pn.ref > 0 {
			if err := benchutil.Dashed(p, "", benchutil.Grey, 0, pn.ref, xmax, pn.ref); err != nil {
				return err
			}
		}
		marks := map[string]float64{" move start": rep.Move.StartS}
		if rep.Move.EndS > 0 {
			marks[" move end"] = rep.Move.EndS
		}
		for text, t := range marks {
			if err := benchutil.Dashed(p, "", benchutil.Red, t, 0, t, ymax); err != nil {
				return err
			}
			if err := benchutil.Label(p, t, ymax*0.8, text); err != nil {
				return err
			}
		}
		if pn.snap { // mark each snapshot the new node applied
			for _, e := range rep.Move.Events {
				if strings.Contains(e.What, fmt.Sprintf("n%d: snapshot applied", rep.Move.ToNode)) {
					if err := benchutil.Dashed(p, "", benchutil.Green, e.T, 0, e.T, ymax); err != nil {
						return err
					}
				}
			}
			p.Title.Text += "; green: snapshot applied by the new node"
		}
		rows = append(rows, p)
	}
	return benchutil.SavePNG(file, rows, 2.4*vg.Inch)
}
