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

	"github.com/shoaldb/shoal/autopilot/decisions"
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
		tr.decisions = append(tr.decisions, asDecisions(ds, start)...)
		tr.mu.Unlock()
	}
	return desc, nil
}

// runDecisions is the decision log's entries since the measured workload started, or nil when the
// log cannot be read (the meta leader killed by the scenario): a report without them says so by
// their absence, and the run's figures do not depend on them.
func runDecisions(e *env) []report.Decision {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ds, err := decisionsSince(ctx, e, e.start)
	if err != nil {
		return nil
	}
	return asDecisions(ds, e.start)
}

// asDecisions is the report's form of decision-log entries, timed from ref.
func asDecisions(ds []decisions.Entry, ref time.Time) []report.Decision {
	out := make([]report.Decision, 0, len(ds))
	for _, d := range ds {
		out = append(out, report.Decision{AtS: report.Round1(d.Time.Sub(ref).Seconds()), Policy: d.Policy, Operator: d.Operator,
			Range: d.Range, Reason: d.Reason, Status: d.Status, Notes: d.Notes})
	}
	return out
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

// loadSurge adds the surge's client threads.
func loadSurge(_ context.Context, e *env) (string, error) {
	e.clients.Add(e.sc.Surge.Threads)
	return fmt.Sprintf("+%d client threads", e.sc.Surge.Threads), nil
}

// startController starts the surge's elasticity controller (the chapter's §2.3.3) and returns at
// once. Like the chapter's monitor it combines the response times its clients see: it learns their
// steady latency for Surge.LearnFor (the median of its 2-s windows' means, after two seconds of
// warm-up), sets its target to report.ChapterTargetFactor × that, and from then on evaluates 2-s windows of
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
		for w := from; w+report.ChapterWindowS <= learnEnd; w += report.ChapterWindowS {
			if m, ok := e.meanMs(w, w+report.ChapterWindowS); ok {
				means = append(means, m)
			}
		}
		base := report.Median(means)
		if math.IsNaN(base) {
			return
		}
		target := report.ChapterTargetFactor * base
		over, firstOver := 0, 0
		for w := learnEnd; wait(w + report.ChapterWindowS); w += report.ChapterWindowS {
			m, ok := e.meanMs(w, w+report.ChapterWindowS)
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
					target, report.ChapterTargetFactor, base, over, m)
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
	h := report.NewHist()
	e.mu.Lock()
	for i := max(from, 0); i < to && i < len(e.perSec); i++ {
		h.Merge(e.perSec[i])
	}
	e.mu.Unlock()
	return h.Mean() / 1000, h.TotalCount() > 0
}

// joinReport measures the run's join (nil when no node joined). For a surge it also marks the join
// as the run's task event.
//
// With a capacity probe (probe > 0) the join's figures are the paced part's: the probe's closed-loop
// seconds are left out (capacityOf measures them).
func joinReport(rr *RunReport, e *env, warmup, probe float64) *JoinReport {
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
		return report.Round1(t.Sub(tr.nodeStart).Seconds())
	}
	start, end := runS(tr.nodeStart), runS(tr.end)
	if tr.end.IsZero() {
		end = float64(len(rr.Series))
	}
	if !tr.trigger.IsZero() { // the surge's events do not include the join: mark it
		rr.Events = append(rr.Events, EventMark{T: start, EndT: end, What: strings.TrimSpace(string(JoinNode) + " " + tr.why), Label: string(JoinNode), Task: true})
	}
	jr := &JoinReport{JoinStartS: report.Round1(start), TriggerWhy: tr.why, FirstServedS: since(tr.firstLead), Done: !tr.recDone.IsZero(), DipBinS: report.DipBinS, SLOFactor: report.SLOFactor,
		ChapterTargetFactor: report.ChapterTargetFactor, Timeline: tr.decisions, JoinS: report.Round1(end - start), WindowEndS: report.Round3(end)}
	if !tr.trigger.IsZero() {
		jr.TriggerS, jr.ViolatedSinceS = report.Round1(runS(tr.trigger)), report.Round1(runS(tr.violatedSince))
	}
	if jr.Done {
		jr.JoinS = report.Round1(runS(tr.recDone) - start)
	}
	steadyTo := start // the SLO thresholds come from the steady state: up to the join, or to the surge
	for _, ev := range rr.Events {
		if ev.Label == string(LoadSurge) {
			steadyTo = min(steadyTo, ev.T)
		}
	}
	series, perSec := rr.Series, e.perSec
	if probe > 0 {
		n := min(int(probe), len(series))
		series, perSec = series[:n], perSec[:min(n, len(perSec))]
	}
	report.MeasureJoin(jr, series, perSec, warmup, steadyTo, start, end)
	jr.FullShareS = report.FullShareS(rr.Series, e.sc.Nodes, start, end)
	return jr
}

// Capacity compares a paced run's closed-loop throughput at the end of its warm-up (caches warmed,
// before the event) with that of its probe at the end of the run (after it): what the cluster
// could serve before and after, which its paced seconds cannot show.
type Capacity struct {
	BeforeFromS float64 `json:"before_from_s"`
	BeforeToS   float64 `json:"before_to_s"`
	BeforeOps   float64 `json:"before_ops_per_s"`
	AfterFromS  float64 `json:"after_from_s"`
	AfterToS    float64 `json:"after_to_s"`
	AfterOps    float64 `json:"after_ops_per_s"`
	Ratio       float64 `json:"after_before"`
}

// capacityWindowS is the warm-up's closed-loop seconds the capacity before counts (its last), and
// probeSkipS the probe's first seconds it leaves out (the paced queue turning into a closed loop).
const (
	capacityWindowS = 10
	probeSkipS      = 2
)

// capacityOf measures the probes of a run paced from warmup with a closed-loop probe from probe to
// its end; nil without a probe or with either window empty.
func capacityOf(series []Point, warmup, probe float64) *Capacity {
	if probe <= 0 || len(series) == 0 {
		return nil
	}
	c := &Capacity{BeforeFromS: max(warmup-capacityWindowS, warmup/2), BeforeToS: warmup, AfterFromS: probe + probeSkipS,
		AfterToS: series[len(series)-1].T}
	s := seriesOf(series)
	ops := func(p Point) float64 { return float64(p.Ops) }
	c.BeforeOps, c.AfterOps = s.mean(c.BeforeFromS, c.BeforeToS, ops), s.mean(c.AfterFromS, c.AfterToS, ops)
	if c.BeforeOps <= 0 || c.AfterOps <= 0 {
		return nil
	}
	c.Ratio = c.AfterOps / c.BeforeOps
	return c
}
