package scenario

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/shoaldb/shoal/bench/report"
)

// A synthetic run: 1000 ops/s at 10 ms until t=30, then a join from 30 s to 50 s during which
// throughput is 800 ops/s and latency 20 ms for the first 10 s, then back to normal.
func TestMeasureJoin(t *testing.T) {
	var series []Point
	var perSec []*hdrhistogram.Histogram
	for s := 1; s <= 60; s++ {
		ops, lat := int64(1000), 10*time.Millisecond
		if s > 30 && s <= 40 {
			ops, lat = 800, 20*time.Millisecond
		}
		h := report.NewHist()
		for i := int64(0); i < ops; i++ {
			_ = h.RecordValue(report.ClampUs(lat))
		}
		series = append(series, Point{T: float64(s), Ops: ops, P99Ms: report.UsToMs(h.ValueAtQuantile(99)),
			P50Ms: report.UsToMs(h.ValueAtQuantile(50))})
		perSec = append(perSec, h)
	}
	jr := &JoinReport{}
	report.MeasureJoin(jr, series, perSec, 10, 30, 30, 50)
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.02*math.Max(1, math.Abs(want)) }
	if jr.PreJoinThroughput != 1000 {
		t.Errorf("pre-join throughput %v, want 1000", jr.PreJoinThroughput)
	}
	if len(jr.DipBins) != 2 || !near(jr.DipBins[0], -0.2) || !near(jr.DipBins[1], 0) {
		t.Errorf("dip bins %v, want [-0.2 0]", jr.DipBins)
	}
	if !near(jr.WorstDip, -0.2) || jr.DipNoise != 0 || !near(jr.DipBeyondNoise, -0.2) {
		t.Errorf("worst dip %v noise %v beyond noise %v, want -0.2, 0 and -0.2", jr.WorstDip, jr.DipNoise, jr.DipBeyondNoise)
	}
	// The chapter's score: 2-s windows of the mean (20 ms) over 1.25 x 10 ms: 5 windows, 7.5 ms each.
	if !near(jr.ChapterTargetMs, 12.5) || jr.ChapterViolations != 5 || !near(jr.ChapterExcessMs, 37.5) {
		t.Errorf("chapter target %v violations %d excess %v, want 12.5, 5, 37.5", jr.ChapterTargetMs, jr.ChapterViolations, jr.ChapterExcessMs)
	}
	if jr.ChapterWindows != 10 {
		t.Errorf("chapter windows %d, want 10", jr.ChapterWindows)
	}
	// The 1-s p99 score: (20 ms) over 1.5 x 10 ms: 10 windows, 5 ms each.
	if jr.ViolatingWindows != 10 || !near(jr.ExcessMs, 50) {
		t.Errorf("violating windows %d excess %v, want 10 and 50", jr.ViolatingWindows, jr.ExcessMs)
	}
	if !near(jr.ThroughputRatio, 0.9) || !near(jr.PostJoinRatio, 1) {
		t.Errorf("throughput ratio %v post %v, want 0.9 and 1", jr.ThroughputRatio, jr.PostJoinRatio)
	}
}

func TestFullShareS(t *testing.T) {
	// Node 3's leaderships per second; seconds end at t = 1, 2, ...; the join runs from 0.5 to 6.
	series := func(led ...int) []Point {
		out := make([]Point, len(led))
		for i, l := range led {
			out[i] = Point{T: float64(i + 1), Nodes: []NodeSecond{{Leaders: 8}, {Leaders: 8}, {Leaders: 8}, {Leaders: l}}}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		led  []int
		want float64
	}{
		{"step by step", []int{0, 1, 1, 3, 6, 6, 6, 6}, 4.5},
		{"all at the end", []int{0, 0, 0, 0, 0, 6, 6, 6}, 5.5},
		{"share reached, then one lost before the end", []int{0, 2, 3, 2, 2, 2, 2, 2}, 1.5},
		{"led nothing", []int{0, 0, 0, 0, 0, 0, 0, 0}, -1},
	} {
		if got := report.FullShareS(series(tc.led...), 3, 0.5, 6); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := report.FullShareS([]Point{{T: 1, Nodes: []NodeSecond{{Leaders: 1}, {Leaders: 2}}}}, 3, 0, 1); got != -1 {
		t.Errorf("series without the node: %v, want -1", got)
	}
}

// TestJoinStepJSON: a join's timeline entries keep their shape in report.json.
func TestJoinStepJSON(t *testing.T) {
	b, err := json.Marshal(JoinStep{AtS: 1.5, Policy: "incremental_join", Operator: "move-replica", Range: 7, Status: "succeeded"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at_s":1.5,"policy":"incremental_join","operator":"move-replica","range":7,"reason":"","status":"succeeded"}`
	if string(b) != want {
		t.Fatalf("JoinStep JSON = %s, want %s", b, want)
	}
}

// TestBalanceLeadersTiny: the join scenarios' first event leaves every node leading its share of the
// user ranges, and says so.
func TestBalanceLeadersTiny(t *testing.T) {
	sc, ctx := tinyScenario(t, "join")
	sc.Events, sc.Splits = sc.Events[:1], 6
	rep, err := Run(ctx, sc, Options{Dir: t.TempDir(), Out: t.TempDir(), Duration: 4 * time.Second, Records: 300, Threads: 2,
		Variants: []string{"incremental"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Runs[0]
	if len(r.Events) != 1 || r.Events[0].Error != "" || !strings.Contains(r.Events[0].What, "leaders per node [2 2 2]") {
		t.Fatalf("balance event = %+v, want leaders per node [2 2 2] and no error", r.Events)
	}
	var last []int
	for _, n := range r.Series[len(r.Series)-1].Nodes {
		last = append(last, n.Leaders)
	}
	if fmt.Sprint(last) != "[2 2 2]" {
		t.Errorf("leaders per node at the end = %v, want [2 2 2]", last)
	}
}

// The capacity probes: the warm-up's last 10 closed-loop seconds against the probe's seconds after
// its first two, the paced seconds between them left out; no probe, no figure.
func TestCapacityOf(t *testing.T) {
	var series []Point
	for s := 1; s <= 40; s++ {
		ops := int64(600) // paced
		switch {
		case s <= 10:
			ops = 900 // the warm-up's first half: not counted
		case s <= 20:
			ops = 1000 // the warm-up's end
		case s > 30 && s <= 32:
			ops = 5000 // the probe's queue draining: skipped
		case s > 32:
			ops = 1500
		}
		series = append(series, Point{T: float64(s), Ops: ops})
	}
	c := capacityOf(series, 20, 30)
	if c == nil || c.BeforeOps != 1000 || c.AfterOps != 1500 || c.Ratio != 1.5 {
		t.Fatalf("capacity %+v, want 1000 before, 1500 after, ratio 1.5", c)
	}
	if c.BeforeFromS != 10 || c.AfterFromS != 32 || c.AfterToS != 40 {
		t.Errorf("windows %+v, want before 10-20 s, after 32-40 s", c)
	}
	if c := capacityOf(series, 20, 0); c != nil {
		t.Errorf("capacity without a probe: %+v, want none", c)
	}
}

// The paced scenarios of the table: read-hints and join pace after their warm-up, join probes its
// capacity after the join.
func TestPacedTable(t *testing.T) {
	rh, _ := Lookup("read-hints")
	j, _ := Lookup("join")
	if rh.Pace <= 0 || j.Pace <= 0 {
		t.Errorf("paces: read-hints %v, join %v; want both paced", rh.Pace, j.Pace)
	}
	for _, ev := range j.Events {
		if ev.Do == JoinNode && !(ev.At > j.Warmup && ev.At < j.Probe && j.Probe < j.Duration) {
			t.Errorf("join at %v, warm-up %v, probe %v, duration %v: want warm-up < join < probe < end", ev.At, j.Warmup, j.Probe, j.Duration)
		}
	}
}
