package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
)

// joinTrace is what a join's actions observed, for joinReport: when the node was started and ran,
// when it first led a range (polled every 50 ms: the series samples once a second), the join record
// and the autopilot's decisions; for a surge, the controller's decision.
type joinTrace struct {
	mu                                 sync.Mutex
	nodeStart, firstLead, end, recDone time.Time
	trigger, violatedSince             time.Time
	why                                string
	decisions                          []JoinStep
	done                               chan struct{} // closed when the join's action is over
}

// joinNode starts the spare node and returns once the autopilot has completed its join.
func joinNode(ctx context.Context, e *env) (string, error) {
	if !e.c.local() {
		return "", errNotLocal
	}
	tr := e.newJoinTrace()
	defer close(tr.done)
	return follow(ctx, e, tr)
}

// newJoinTrace starts the run's join trace.
func (e *env) newJoinTrace() *joinTrace {
	tr := &joinTrace{done: make(chan struct{})}
	e.mu.Lock()
	e.join = tr
	e.mu.Unlock()
	return tr
}

// follow starts the spare node, follows its join until it is done or ctx ends, and collects the
// join's decisions.
func follow(ctx context.Context, e *env, tr *joinTrace) (string, error) {
	start := time.Now()
	set := func(t *time.Time, v time.Time) { tr.mu.Lock(); *t = v; tr.mu.Unlock() }
	set(&tr.nodeStart, start)
	i, err := e.c.Add(ctx)
	if err != nil {
		return "", fmt.Errorf("start the new node: %w", err)
	}
	nd := e.c.Node(i)
	id := nd.KV.NodeID()
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		for pollCtx.Err() == nil {
			if l, _ := userReplicas(nd); l > 0 {
				set(&tr.firstLead, time.Now())
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	desc := ""
	for desc == "" {
		select {
		case <-ctx.Done():
			desc = fmt.Sprintf("n%d still joining after %.1fs", id, time.Since(start).Seconds())
		case <-time.After(250 * time.Millisecond):
		}
		nodes, _ := e.cl.Nodes(ctx)
		for _, n := range nodes {
			if j := n.GetJoin(); n.GetDesc().GetNodeId() == id && j != nil {
				set(&tr.recDone, unixOrZero(j.DoneUnixNanos))
				if j.DoneUnixNanos != 0 && desc == "" {
					desc = fmt.Sprintf("n%d joined (%s): %d replicas, leads %d, in %.1fs", id, j.Strategy, j.Held, j.Leading,
						time.Unix(0, j.DoneUnixNanos).Sub(start).Seconds())
				}
			}
		}
	}
	set(&tr.end, time.Now())
	// The autopilot's decisions during the join (the run may be over: a deadline of its own).
	dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if ds, err := decisionsSince(dctx, e, start); err == nil {
		tr.mu.Lock()
		for _, d := range ds {
			tr.decisions = append(tr.decisions, JoinStep{AtS: round1(d.Time.Sub(start).Seconds()), Policy: d.Policy, Operator: d.Operator,
				Range: d.Range, Reason: d.Reason, Status: d.Status, Notes: d.Notes})
		}
		tr.mu.Unlock()
	}
	return desc, nil
}

// decisionsSince reads the autopilot's decision log: the entries proposed at or after start.
func decisionsSince(ctx context.Context, e *env, start time.Time) ([]decisions.Entry, error) {
	_, raw, err := e.cl.Decisions(ctx)
	var ds []decisions.Entry
	if err == nil {
		err = json.Unmarshal(raw, &ds)
	}
	return slices.DeleteFunc(ds, func(d decisions.Entry) bool { return d.Time.Before(start) }), err
}

func unixOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// loadSurge adds the surge's client threads.
func loadSurge(_ context.Context, e *env) (string, error) {
	e.clients.Add(e.sc.Surge.Threads)
	return fmt.Sprintf("+%d client threads", e.sc.Surge.Threads), nil
}

// startController starts the surge's elasticity controller (the chapter's §2.3.3) and returns at
// once. Like the chapter's monitor it combines the response times its clients see: it learns their
// steady latency for Surge.LearnFor (the median of its 2-s windows' means, after two seconds of
// warm-up), sets its target to chapterTargetFactor × that, and from then on evaluates 2-s windows of
// the mean latency; after Surge.TriggerWindows consecutive windows over the target it starts the
// spare node. Nothing in it knows when the surge comes. The autopilot cannot start machines, so the
// decision sits with the controller, as it would with an orchestrator; the join is the autopilot's.
func startController(ctx context.Context, e *env) (string, error) {
	if !e.c.local() {
		return "", errNotLocal
	}
	tr := e.newJoinTrace()
	from := int(time.Since(e.start).Seconds()) + 2
	learnEnd := from - 2 + int(e.sc.Surge.LearnFor.Seconds())
	go func() {
		defer close(tr.done)
		wait := func(sec int) bool { // until second sec of the run has been sampled
			for ctx.Err() == nil {
				e.mu.Lock()
				n := len(e.perSec)
				e.mu.Unlock()
				if n >= sec {
					return true
				}
				time.Sleep(100 * time.Millisecond)
			}
			return false
		}
		if !wait(learnEnd) {
			return
		}
		var means []float64
		for w := from; w+chapterWindowS <= learnEnd; w += chapterWindowS {
			if m, ok := e.meanMs(w, w+chapterWindowS); ok {
				means = append(means, m)
			}
		}
		base := report.Median(means)
		if math.IsNaN(base) {
			return
		}
		target := chapterTargetFactor * base
		over, firstOver := 0, 0
		for w := learnEnd; wait(w + chapterWindowS); w += chapterWindowS {
			m, ok := e.meanMs(w, w+chapterWindowS)
			if !ok || m <= target {
				over = 0
				continue
			}
			if over++; over == 1 {
				firstOver = w
			}
			if over >= e.sc.Surge.TriggerWindows {
				tr.mu.Lock()
				tr.trigger, tr.violatedSince = time.Now(), e.start.Add(time.Duration(firstOver)*time.Second)
				tr.why = fmt.Sprintf("controller: 2-s mean latency over the target %.1f ms (%.2f x the %.1f ms steady median) for %d windows, last %.1f ms: add a node",
					target, chapterTargetFactor, base, over, m)
				tr.mu.Unlock()
				_, _ = follow(ctx, e, tr)
				return
			}
		}
	}()
	return fmt.Sprintf("learning for %s", e.sc.Surge.LearnFor), nil
}

// meanMs is the mean latency of the run's seconds [from, to) (0-based), and whether it saw any.
func (e *env) meanMs(from, to int) (float64, bool) {
	h := benchutil.NewHist()
	e.mu.Lock()
	for i := max(from, 0); i < to && i < len(e.perSec); i++ {
		h.Merge(e.perSec[i])
	}
	e.mu.Unlock()
	return h.Mean() / 1000, h.TotalCount() > 0
}

// JoinStep is one autopilot decision during the join, at its time from the join's start.
type JoinStep struct {
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
//     dipBinS long, from the join's start, against the 15 s before the join. DipNoise is the worst
//     bin of the steady state (counted back from the join) against the same mean, at most 0: the
//     noise floor. DipBeyondNoise is WorstDip less DipNoise.
//   - SLO (eq. 2.1–2.3): 2-second windows of the mean response time over a target, ChapterTargetFactor
//     × the steady mean (the chapter: 50 ms over 40 ms); and 1-second windows of the p99 over
//     sloFactor × the steady p99. Each counts the windows over it and sums the excess, from the
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
	dipBinS             = 10
	sloFactor           = 1.5
	chapterTargetFactor = 1.25
	chapterWindowS      = 2
	preJoinS            = 15
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

// joinReport measures the run's join (nil when no node joined). For a surge it also marks the join
// as the run's task event.
func joinReport(rr *RunReport, e *env, warmup float64) *JoinReport {
	tr := e.join
	if tr == nil {
		return nil
	}
	select { // the surge's controller may still be collecting the join's decisions
	case <-tr.done:
	case <-time.After(10 * time.Second):
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.nodeStart.IsZero() {
		return nil // the surge never triggered a join
	}
	runS := func(t time.Time) float64 { return t.Sub(e.start).Seconds() }
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return round1(t.Sub(tr.nodeStart).Seconds())
	}
	start, end := runS(tr.nodeStart), runS(tr.end)
	if tr.end.IsZero() {
		end = float64(len(rr.Series))
	}
	if !tr.trigger.IsZero() { // the surge's events do not include the join: mark it
		rr.Events = append(rr.Events, EventMark{T: start, EndT: end, What: strings.TrimSpace(string(JoinNode) + " " + tr.why), Label: string(JoinNode), Task: true})
	}
	jr := &JoinReport{JoinStartS: round1(start), TriggerWhy: tr.why, FirstServedS: since(tr.firstLead), Done: !tr.recDone.IsZero(), DipBinS: dipBinS, SLOFactor: sloFactor,
		ChapterTargetFactor: chapterTargetFactor, Timeline: tr.decisions, JoinS: round1(end - start), WindowEndS: round3(end)}
	if !tr.trigger.IsZero() {
		jr.TriggerS, jr.ViolatedSinceS = round1(runS(tr.trigger)), round1(runS(tr.violatedSince))
	}
	if jr.Done {
		jr.JoinS = round1(runS(tr.recDone) - start)
	}
	steadyTo := start // the SLO thresholds come from the steady state: up to the join, or to the surge
	for _, ev := range rr.Events {
		if ev.Label == string(LoadSurge) {
			steadyTo = min(steadyTo, ev.T)
		}
	}
	measureJoin(jr, rr.Series, e.perSec, warmup, steadyTo, start, end)
	jr.FullShareS = fullShareS(rr.Series, e.sc.Nodes, start, end)
	return jr
}

// fullShareS is JoinReport.FullShareS for the node at index node.
func fullShareS(series []Point, node int, start, end float64) float64 {
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
			return round1(p.T - start)
		}
	}
	return -1
}

// measureJoin fills jr's throughput and SLO figures: the steady state from warmup to steadyTo, the
// join from start to end, the rest after it. A second counts in a window when its midpoint lies in it.
func measureJoin(jr *JoinReport, series []Point, perSec []*hdrhistogram.Histogram, warmup, steadyTo, start, end float64) {
	in := func(p Point, from, to float64) bool { mid := p.T - 0.5; return mid >= from && mid < to }
	// The pre-join reference is the most recent preJoinS before the join, so that a drift of the
	// shared machine earlier in the run does not count as the join's.
	pre, _, preN := window(series, perSec, math.Max(warmup, start-preJoinS), start)
	_, preP99, _ := window(series, perSec, warmup, steadyTo)
	if preN == 0 || pre == 0 {
		return
	}
	jr.PreJoinThroughput, jr.SLOThresholdMs = pre, sloFactor*preP99
	steady := benchutil.NewHist()
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
	jr.ChapterTargetMs = chapterTargetFactor * jr.SteadyMeanMs
	if nDuring > 0 {
		jr.ThroughputRatio = during / nDuring / pre
	}
	if nAfter > 0 {
		jr.PostJoinRatio = after / nAfter / pre
	}
	// Bins (the last may be partial; a bin needs at least half its seconds, but the first counts).
	bins := func(from, to float64) []float64 {
		var out []float64
		for b := from; b < to; b += dipBinS {
			var ops, n float64
			for _, p := range series {
				if in(p, b, math.Min(b+dipBinS, to)) {
					ops, n = ops+float64(p.Ops), n+1
				}
			}
			if n > 0 && (2*n >= dipBinS || len(out) == 0) {
				out = append(out, round3(ops/n/pre-1))
			}
		}
		return out
	}
	jr.DipBins = bins(start, end)
	if len(jr.DipBins) > 0 {
		jr.WorstDip = slices.Min(jr.DipBins)
	}
	for b := start - dipBinS; b >= warmup-0.5; b -= dipBinS {
		for _, d := range bins(b, b+dipBinS) {
			jr.DipNoise = math.Min(jr.DipNoise, d)
		}
	}
	jr.DipBeyondNoise = jr.WorstDip - jr.DipNoise
	jr.ViolatingWindows, jr.ExcessMs = WindowsOver(series, jr.SLOThresholdMs, start, end)
	for w := start; w < end; w += chapterWindowS {
		h := benchutil.NewHist()
		for i, p := range series {
			if in(p, w, w+chapterWindowS) && i < len(perSec) {
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
		*f = round3(*f)
	}
}
