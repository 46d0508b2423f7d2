package scenario

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/shoaldb/shoal/bench/report"
)

// ReadHintsRun is what one run of a read-hints scenario measured: around its leadership change (the
// first event after the gathering), or over its toggled windows.
type ReadHintsRun struct {
	ChangeT float64 `json:"change_t"`
	Change  string  `json:"change"`
	// OldLeader served every range before the change; NewLeader served most of them after it.
	OldLeader uint64 `json:"old_leader"`
	NewLeader uint64 `json:"new_leader"`
	// The steady state before the change, from SteadyFromS (the warm-up's end): throughput (ops/s)
	// and p99 (the mean of the per-second p99s).
	SteadyFromS      float64 `json:"steady_from_s"`
	SteadyThroughput float64 `json:"steady_throughput"`
	SteadyP99Ms      float64 `json:"steady_p99_ms"`
	// After the change: the worst second of the first 10 (a share of the steady throughput), the mean
	// over the first 1, 5 and 10 s, the worst p99 of the first 5 s, and the time until a 3-s window
	// first averages 95 % of the steady throughput (nil: not within the run).
	WorstSecond   float64  `json:"worst_second_ratio"`
	First1sRatio  float64  `json:"first_1s_ratio"`
	First5sRatio  float64  `json:"first_5s_ratio"`
	First10sRatio float64  `json:"first_10s_ratio"`
	MaxP99After   float64  `json:"max_p99_ms_first_5s"`
	TimeTo95S     *float64 `json:"time_to_95_s"`
	// The 1-s goal: the first second's p99 against the steady one, and the time until three
	// seconds in a row each have a p99 of at most 1.5× the steady one.
	P99First1sMs    float64  `json:"p99_first_1s_ms"`
	P99First1sRatio float64  `json:"p99_first_1s_ratio"`
	TimeToP99S      *float64 `json:"time_to_p99_1_5x_s"`
	// The worst p99 of the first 5 s against the steady one, and the operations short of the steady
	// rate summed over the first 10 s (with a paced load, the offered operations not served).
	MaxP99First5sRatio float64 `json:"max_p99_first_5s_ratio"`
	ShortfallOps10s    float64 `json:"shortfall_ops_first_10s"`
	// Block-cache hit ratios: the old leader over the 10 s before the change, the new leader over the
	// same 10 s (as a follower: hint replays and raft) and over the first 1 s and 5 s after it; the
	// time until the new leader's ratio stays within half a point of the old one's for 3 s; its own
	// level 15–30 s after the change and the time until it stays within half a point of that.
	OldLeaderHitRatio        *float64 `json:"old_leader_hit_ratio"`
	NewLeaderHitRatioBefore  *float64 `json:"new_leader_hit_ratio_before"`
	NewLeaderHitRatioFirst1s *float64 `json:"new_leader_hit_ratio_first_1s"`
	NewLeaderHitRatioFirst5s *float64 `json:"new_leader_hit_ratio_first_5s"`
	HitRatioRecoveryS        *float64 `json:"hit_ratio_recovery_s"`
	NewLeaderLevel           *float64 `json:"new_leader_level"`
	WarmUpS                  *float64 `json:"warm_up_s"`
	// Read hints in the steady state (or the toggled windows with hints on): reads the serving node
	// recorded per second, bytes it shipped per second (to every follower) and per recorded read,
	// hints applied per second per follower, hints dropped per second cluster-wide; the process's
	// CPU (every node and the clients, in cores) and per operation.
	RecordedPerSec  float64 `json:"recorded_per_s"`
	HintBytesPerSec float64 `json:"hint_bytes_per_s"`
	BytesPerRead    float64 `json:"hint_bytes_per_read"`
	AppliedPerSec   float64 `json:"follower_applied_per_s"`
	DroppedPerSec   float64 `json:"dropped_per_s"`
	SteadyCPU       float64 `json:"steady_cpu_cores"`
	CPUPerOpUs      float64 `json:"cpu_per_op_us"`
	// A toggled run's windows and the cost of hints from their pairs, over all pairs and over those
	// in which neither window lost LowStealMax of the machine's CPU to its host.
	ToggleWindows  []report.ToggleWindow `json:"toggle_windows,omitempty"`
	Paired         *report.PairedCost    `json:"paired,omitempty"`
	PairedLowSteal *report.PairedCost    `json:"paired_low_steal,omitempty"`
}

// analyzeReadHints computes a read-hints run's figures from its series.
func analyzeReadHints(r RunReport, warmup float64, toggle *Toggle) *ReadHintsRun {
	out := &ReadHintsRun{SteadyFromS: warmup}
	if toggle != nil {
		analyzeToggles(r, out, toggle)
		return out
	}
	T := math.NaN()
	for _, e := range r.Events {
		if e.Label != string(Gather) && e.Error == "" && math.IsNaN(T) {
			T, out.ChangeT, out.Change = e.T, e.T, e.What
		}
	}
	if math.IsNaN(T) {
		return out
	}
	s := seriesOf(r.Series)
	ops := func(p Point) float64 { return float64(p.Ops) }
	p99 := func(p Point) float64 { return p.P99Ms }
	out.SteadyThroughput, out.SteadyP99Ms = s.mean(warmup, T, ops), s.mean(warmup, T, p99)
	if out.SteadyThroughput > 0 {
		st := out.SteadyThroughput
		out.First1sRatio, out.First5sRatio, out.First10sRatio = s.mean(T, T+1, ops)/st, s.mean(T, T+5, ops)/st, s.mean(T, T+10, ops)/st
		out.WorstSecond, out.MaxP99After = s.min(T, T+10, ops)/st, s.max(T, T+5, p99)
		out.TimeTo95S = s.firstRun(T, func(p Point) bool { return float64(p.Ops) >= 0.95*st }, true)
		for _, p := range s.in(T, T+10) {
			out.ShortfallOps10s += max(0, st-float64(p.Ops))
		}
	}
	if out.SteadyP99Ms > 0 {
		out.P99First1sMs = s.mean(T, T+1, p99)
		out.P99First1sRatio = out.P99First1sMs / out.SteadyP99Ms
		out.MaxP99First5sRatio = out.MaxP99After / out.SteadyP99Ms
		out.TimeToP99S = s.firstRun(T, func(p Point) bool { return p.Ops > 0 && p.P99Ms <= 1.5*out.SteadyP99Ms }, false)
	}
	out.OldLeader, out.NewLeader = s.serving(T-10, T), s.serving(T+1, T+11)
	out.OldLeaderHitRatio = s.hitRatio(out.OldLeader, T-10, T)
	out.NewLeaderHitRatioBefore = s.hitRatio(out.NewLeader, T-10, T)
	out.NewLeaderHitRatioFirst1s = s.hitRatio(out.NewLeader, T, T+1)
	out.NewLeaderHitRatioFirst5s = s.hitRatio(out.NewLeader, T, T+5)
	out.NewLeaderLevel = s.hitRatio(out.NewLeader, T+15, T+30)
	warm := func(level *float64) *float64 {
		if level == nil {
			return nil
		}
		return s.firstRun(T, func(p Point) bool {
			r := seriesOf([]Point{p}).hitRatio(out.NewLeader, p.T-1, p.T)
			return r != nil && *r >= *level-0.005
		}, false)
	}
	out.HitRatioRecoveryS, out.WarmUpS = warm(out.OldLeaderHitRatio), warm(out.NewLeaderLevel)
	traffic(out, s, func(p Point) bool { return p.T-0.5 >= warmup && p.T-0.5 < T })
	return out
}

// secs are a run's seconds; second p covers (p.T-1, p.T], and counts in a window when its
// midpoint lies in it.
type secs []Point

func seriesOf(ps []Point) secs { return ps }

func (s secs) in(from, to float64) []Point {
	var out []Point
	for _, p := range s {
		if mid := p.T - 0.5; mid >= from && mid < to {
			out = append(out, p)
		}
	}
	return out
}

func (s secs) mean(from, to float64, v func(Point) float64) float64 {
	ps := s.in(from, to)
	var sum float64
	for _, p := range ps {
		sum += v(p)
	}
	if len(ps) == 0 {
		return 0
	}
	return sum / float64(len(ps))
}

func (s secs) min(from, to float64, v func(Point) float64) float64 {
	out := math.Inf(1)
	for _, p := range s.in(from, to) {
		out = math.Min(out, v(p))
	}
	return zeroInf(out)
}

func (s secs) max(from, to float64, v func(Point) float64) float64 {
	out := math.Inf(-1)
	for _, p := range s.in(from, to) {
		out = math.Max(out, v(p))
	}
	return zeroInf(out)
}

func zeroInf(v float64) float64 {
	if math.IsInf(v, 0) {
		return 0
	}
	return v
}

// firstRun is the time from T until the start of the first three seconds in a row that each satisfy
// ok, or (mean) whose three-second mean throughput does; nil when none does within the run.
func (s secs) firstRun(T float64, ok func(Point) bool, mean bool) *float64 {
	for i := 0; i+2 < len(s); i++ {
		if s[i].T-1 < T-0.5 {
			continue
		}
		w := s[i : i+3]
		good := ok(w[0]) && ok(w[1]) && ok(w[2])
		if mean {
			good = ok(Point{Ops: (w[0].Ops + w[1].Ops + w[2].Ops) / 3})
		}
		if good {
			d := max(s[i].T-1-T, 0)
			return &d
		}
	}
	return nil
}

// serving is the node that led most user ranges over the window.
func (s secs) serving(from, to float64) uint64 {
	count := map[uint64]int{}
	var best uint64
	for _, p := range s.in(from, to) {
		for _, n := range p.Nodes {
			if count[n.Node] += n.Leaders; n.Node != 0 && (best == 0 || count[n.Node] > count[best]) {
				best = n.Node
			}
		}
	}
	return best
}

// hitRatio is node's block-cache hit ratio over the window (nil: no lookups).
func (s secs) hitRatio(node uint64, from, to float64) *float64 {
	var h, m int64
	for _, p := range s.in(from, to) {
		for _, n := range p.Nodes {
			if n.Node == node && node != 0 {
				h, m = h+n.Hits, m+n.Misses
			}
		}
	}
	if h+m == 0 {
		return nil
	}
	v := float64(h) / float64(h+m)
	return &v
}

// traffic fills the hints figures of out over the seconds keep selects.
func traffic(out *ReadHintsRun, s secs, keep func(Point) bool) {
	var secs, rec, sent, app, followers, drop, cpu, ops float64
	leader := out.OldLeader
	if leader == 0 {
		leader = s.serving(0, math.Inf(1))
	}
	for _, p := range s {
		if !keep(p) {
			continue
		}
		secs, cpu, ops = secs+1, cpu+p.CPU, ops+float64(p.Ops)
		for _, n := range p.Nodes {
			drop += float64(n.Dropped)
			if n.Node == leader {
				rec, sent = rec+float64(n.Recorded), sent+float64(n.BytesSent)
			} else if n.Node != 0 {
				app, followers = app+float64(n.Applied), followers+1
			}
		}
	}
	if secs == 0 {
		return
	}
	out.RecordedPerSec, out.HintBytesPerSec, out.DroppedPerSec, out.SteadyCPU = rec/secs, sent/secs, drop/secs, cpu/secs
	if followers > 0 {
		out.AppliedPerSec = app / followers
	}
	if rec > 0 {
		out.BytesPerRead = sent / rec
	}
	if ops > 0 {
		out.CPUPerOpUs = 1e6 * cpu / ops
	}
}

// LowStealMax is the share of the machine's CPU its host may take in either window of a pair that
// PairedLowSteal keeps: a window the host stole more from measures the host.
const LowStealMax = 0.08

// analyzeToggles fills the toggled windows and their paired cost. Window k runs from its switch plus
// the skip to the next switch (or the run's end).
func analyzeToggles(r RunReport, out *ReadHintsRun, t *Toggle) {
	var switches []EventMark
	for _, e := range r.Events {
		if e.Label == string(PolicyOn) || e.Label == string(PolicyOff) {
			switches = append(switches, e)
		}
	}
	s := seriesOf(r.Series)
	for i, e := range switches {
		to := math.Inf(1)
		if i+1 < len(switches) {
			to = switches[i+1].T
		}
		w := report.ToggleWindow{On: e.Label == string(PolicyOn), FromS: e.T + t.Skip.Seconds(), ToS: to}
		ps := s.in(w.FromS, to)
		if len(ps) == 0 {
			continue
		}
		w.ToS = math.Min(to, w.FromS+float64(len(ps)))
		w.OpsPerS = s.mean(w.FromS, to, func(p Point) float64 { return float64(p.Ops) })
		w.Steal = s.mean(w.FromS, to, func(p Point) float64 { return p.Steal })
		out.ToggleWindows = append(out.ToggleWindows, w)
	}
	out.Change = fmt.Sprintf("%s toggled %d times", r.Variant, len(switches))
	out.Paired = report.CostOfPairs(report.PairWindows(out.ToggleWindows, 1))
	out.PairedLowSteal = report.CostOfPairs(report.PairWindows(out.ToggleWindows, LowStealMax))
	on := func(p Point) bool {
		i := slices.IndexFunc(out.ToggleWindows, func(w report.ToggleWindow) bool { return p.T-0.5 >= w.FromS && p.T-0.5 < w.ToS })
		return i >= 0 && out.ToggleWindows[i].On
	}
	traffic(out, s, on)
}

// printReadHints writes a run's read-hints figures.
func printReadHints(w io.Writer, label string, r *ReadHintsRun) {
	if r.Paired != nil || len(r.ToggleWindows) > 0 {
		fmt.Fprintf(w, "%s: %s; %.0f reads/s recorded, %.0f B/s shipped, %.0f applied/s per follower while on\n",
			label, r.Change, r.RecordedPerSec, r.HintBytesPerSec, r.AppliedPerSec)
		if r.Paired != nil {
			fmt.Fprintf(w, "%s: all pairs: %s\n%s: pairs with steal under %.0f%%: %s\n", label, r.Paired, label, 100*LowStealMax, r.PairedLowSteal)
		}
		return
	}
	fmt.Fprintf(w, "%s: %s at %.0fs; steady %.0f ops/s p99 %.2f ms; worst second %.0f%%, first 1s %.0f%%, 5s %.0f%%, 10s %.0f%%; "+
		"%.0f ops short in the first 10s; time to 95%% %s; p99 first second %.2fx steady, worst of the first 5s %.2fx, within 1.5x after %s; hit ratio old leader n%d %s, new leader n%d before %s, "+
		"first 1s %s, 5s %s, back within 0.5 point after %s, its own level %s after %s; hints %.0f reads/s recorded, %.0f B/s shipped, "+
		"%.0f applied/s per follower; CPU %.2f cores (%.0f us/op)\n",
		label, r.Change, r.ChangeT, r.SteadyThroughput, r.SteadyP99Ms, 100*r.WorstSecond, 100*r.First1sRatio, 100*r.First5sRatio,
		100*r.First10sRatio, r.ShortfallOps10s, fmtSecs(r.TimeTo95S), r.P99First1sRatio, r.MaxP99First5sRatio, fmtSecs(r.TimeToP99S), r.OldLeader, fmtRatio(r.OldLeaderHitRatio),
		r.NewLeader, fmtRatio(r.NewLeaderHitRatioBefore), fmtRatio(r.NewLeaderHitRatioFirst1s), fmtRatio(r.NewLeaderHitRatioFirst5s),
		fmtSecs(r.HitRatioRecoveryS), fmtRatio(r.NewLeaderLevel), fmtSecs(r.WarmUpS), r.RecordedPerSec, r.HintBytesPerSec,
		r.AppliedPerSec, r.SteadyCPU, r.CPUPerOpUs)
}

func fmtSecs(s *float64) string {
	if s == nil {
		return "not within the run"
	}
	return fmt.Sprintf("%.0fs", *s)
}

func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *r)
}
