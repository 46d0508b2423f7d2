package report

import (
	"math"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// JoinStep is one autopilot decision during the join, at its time from the join's start.
type JoinStep = Decision

// Decision is one entry of the autopilot's decision log, at its time from a reference (a run's
// start, a join's start).
type Decision struct {
	AtS      float64  `json:"at_s"`
	Policy   string   `json:"policy"`
	Operator string   `json:"operator"`
	Range    uint64   `json:"range,omitempty"`
	Reason   string   `json:"reason"`
	Status   string   `json:"status"`
	Notes    []string `json:"notes,omitempty"`
}

// JoinReport is the chapter's evaluation of one join (§2.3):
//
//   - Dip: the chapter compares the mean throughput of consecutive 2-minute bins of a 9–26 minute
//     join with the mean of the 5 minutes before it. Ours last a minute or two, so the bins are
//     DipBinS long, from the join's start, against the 15 s before the join. DipNoise is the worst
//     bin of the steady state (counted back from the join) against the same mean, at most 0: the
//     noise floor. DipBeyondNoise is WorstDip less DipNoise.
//   - SLO (eq. 2.1–2.3): 2-second windows of the mean response time over a target, ChapterTargetFactor
//     × the steady mean (the chapter: 50 ms over 40 ms); and 1-second windows of the p99 over
//     SLOFactor × the steady p99. Each counts the windows over it and sums the excess, from the
//     join's start to its end.
type JoinReport struct {
	// JoinStartS is when the new node was started, in the run's seconds. TriggerWhy is the surge
	// controller's reason for adding it, TriggerS when it decided, ViolatedSinceS the start of the
	// first of the windows it acted on.
	JoinStartS     float64 `json:"join_start_s"`
	TriggerWhy     string  `json:"trigger_why,omitempty"`
	TriggerS       float64 `json:"trigger_s,omitempty"`
	ViolatedSinceS float64 `json:"violated_since_s,omitempty"`
	// FirstServedS: from the join's start until the node first led a user range (-1: never).
	// FullShareS: until the end of the first second in which it led as many ranges as when the join
	// ended (-1: none).
	FirstServedS float64 `json:"first_served_s"`
	FullShareS   float64 `json:"full_share_s"`
	JoinS        float64 `json:"join_s"`
	// WindowEndS is where the join's window ends (the scores count the seconds up to it).
	WindowEndS float64 `json:"window_end_s,omitempty"`
	Done       bool    `json:"done"`

	PreJoinThroughput float64   `json:"pre_join_throughput"`
	DipBinS           int       `json:"dip_bin_s"`
	WorstDip          float64   `json:"worst_dip"` // -0.13: the join's worst bin 13 % below the pre-join mean
	DipBins           []float64 `json:"dip_bins"`
	DipNoise          float64   `json:"dip_noise"`
	DipBeyondNoise    float64   `json:"dip_beyond_noise"`
	ThroughputRatio   float64   `json:"throughput_ratio"` // during the join / before
	PostJoinRatio     float64   `json:"post_join_ratio"`  // after the join / before

	SteadyMeanMs        float64 `json:"steady_mean_ms"`
	ChapterTargetMs     float64 `json:"chapter_target_ms"`
	ChapterTargetFactor float64 `json:"chapter_target_factor"`
	ChapterWindows      int     `json:"chapter_windows"`
	ChapterViolations   int     `json:"chapter_violations"`
	ChapterExcessMs     float64 `json:"chapter_excess_ms"`

	SLOThresholdMs   float64 `json:"slo_threshold_ms"`
	SLOFactor        float64 `json:"slo_factor"`
	ViolatingWindows int     `json:"violating_windows"`
	ExcessMs         float64 `json:"excess_ms"`

	Timeline []JoinStep `json:"timeline,omitempty"`
}

const (
	DipBinS             = 10
	SLOFactor           = 1.5
	ChapterTargetFactor = 1.25
	ChapterWindowS      = 2
	PreJoinS            = 15
)

// WindowsOver counts the seconds of series from `from` to `to` (by their midpoint) whose p99 is above
// thresholdMs, and sums their excess over it.
func WindowsOver(series []Point, thresholdMs, from, to float64) (n int, excessMs float64) {
	for _, p := range series {
		if mid := p.T - 0.5; mid >= from && mid < to && p.P99Ms > thresholdMs {
			n++
			excessMs += p.P99Ms - thresholdMs
		}
	}
	return n, excessMs
}

// FullShareS is JoinReport.FullShareS for the node at index node.
func FullShareS(series []Point, node int, start, end float64) float64 {
	led := func(p Point) int {
		if node < len(p.Nodes) {
			return p.Nodes[node].Leaders
		}
		return 0
	}
	target := 0
	for _, p := range series { // the last second that ends by the join's end, or the first after it
		if p.T <= end+1 {
			target = led(p)
		}
	}
	if target == 0 {
		return -1
	}
	for _, p := range series {
		if p.T > start && led(p) >= target {
			return Round1(p.T - start)
		}
	}
	return -1
}

// MeasureJoin fills jr's throughput and SLO figures: the steady state from warmup to steadyTo, the
// join from start to end, the rest after it. A second counts in a window when its midpoint lies in it.
func MeasureJoin(jr *JoinReport, series []Point, perSec []*hdrhistogram.Histogram, warmup, steadyTo, start, end float64) {
	in := func(p Point, from, to float64) bool { mid := p.T - 0.5; return mid >= from && mid < to }
	// The pre-join reference is the most recent PreJoinS before the join, so that a drift of the
	// shared machine earlier in the run does not count as the join's.
	pre, _, preN := Window(series, perSec, math.Max(warmup, start-PreJoinS), start)
	_, preP99, _ := Window(series, perSec, warmup, steadyTo)
	if preN == 0 || pre == 0 {
		return
	}
	jr.PreJoinThroughput, jr.SLOThresholdMs = pre, SLOFactor*preP99
	steady := NewHist()
	var during, after, nDuring, nAfter float64
	for i, p := range series {
		switch {
		case in(p, warmup, steadyTo) && i < len(perSec):
			steady.Merge(perSec[i])
		case in(p, start, end):
			during, nDuring = during+float64(p.Ops), nDuring+1
		case p.T-0.5 >= end:
			after, nAfter = after+float64(p.Ops), nAfter+1
		}
	}
	jr.SteadyMeanMs = steady.Mean() / 1000
	jr.ChapterTargetMs = ChapterTargetFactor * jr.SteadyMeanMs
	if nDuring > 0 {
		jr.ThroughputRatio = during / nDuring / pre
	}
	if nAfter > 0 {
		jr.PostJoinRatio = after / nAfter / pre
	}
	// Bins (the last may be partial; a bin needs at least half its seconds, but the first counts).
	bins := func(from, to float64) []float64 {
		var out []float64
		for b := from; b < to; b += DipBinS {
			var ops, n float64
			for _, p := range series {
				if in(p, b, math.Min(b+DipBinS, to)) {
					ops, n = ops+float64(p.Ops), n+1
				}
			}
			if n > 0 && (2*n >= DipBinS || len(out) == 0) {
				out = append(out, Round3(ops/n/pre-1))
			}
		}
		return out
	}
	jr.DipBins = bins(start, end)
	if len(jr.DipBins) > 0 {
		jr.WorstDip = slices.Min(jr.DipBins)
	}
	for b := start - DipBinS; b >= warmup-0.5; b -= DipBinS {
		for _, d := range bins(b, b+DipBinS) {
			jr.DipNoise = math.Min(jr.DipNoise, d)
		}
	}
	jr.DipBeyondNoise = jr.WorstDip - jr.DipNoise
	jr.ViolatingWindows, jr.ExcessMs = WindowsOver(series, jr.SLOThresholdMs, start, end)
	for w := start; w < end; w += ChapterWindowS {
		h := NewHist()
		for i, p := range series {
			if in(p, w, w+ChapterWindowS) && i < len(perSec) {
				h.Merge(perSec[i])
			}
		}
		if h.TotalCount() == 0 {
			continue
		}
		jr.ChapterWindows++
		if excess := h.Mean()/1000 - jr.ChapterTargetMs; excess > 0 {
			jr.ChapterViolations++
			jr.ChapterExcessMs += excess
		}
	}
	for _, f := range []*float64{&jr.DipBeyondNoise, &jr.ExcessMs, &jr.ChapterExcessMs,
		&jr.WorstDip, &jr.DipNoise, &jr.ThroughputRatio, &jr.PostJoinRatio, &jr.SteadyMeanMs, &jr.ChapterTargetMs,
		&jr.SLOThresholdMs, &jr.PreJoinThroughput} {
		*f = Round3(*f)
	}
}

// Round1 rounds x to one decimal, Round3 to three: the precision reports keep.
func Round1(x float64) float64 { return math.Round(x*10) / 10 }

// Round3 rounds x to three decimals.
func Round3(x float64) float64 { return math.Round(x*1000) / 1000 }
