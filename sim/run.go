package sim

import (
	"context"
	"fmt"
	"github.com/shoaldb/shoal/bench/report"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/executor"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/workload"
)

// Options override a scenario's size for one invocation; zero fields keep the scenario's.
type Options struct {
	Nodes, Ranges int
	Duration      time.Duration
	Seed          uint64
	Workload      string
	// OnlyPolicyOn skips the policy-off run; OnlyPolicyOff the policy-on run.
	OnlyPolicyOn, OnlyPolicyOff bool
	// Wall, if set, reads the wall clock for the report's cost figures (nil: they stay zero, and
	// the report is a pure function of the scenario, the options and the seed).
	Wall func() time.Time
	// Progress, if set, is called every simulated minute with the simulated time and the decisions
	// so far (the CLI prints it; it changes nothing in the run).
	Progress func(simulated time.Duration, decisions int)
}

// Result is a simulation's report and the decision log of each run (Report.Runs' order).
type Result struct {
	Report    Report
	Decisions [][]Decision
}

// epoch is the virtual clock's start: a fixed date, so that a run's log does not depend on when it ran.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Run simulates sc: with its policy on, then off (unless OnlyPolicyOn or it has none), each run on a
// fresh cluster from the same seed.
func Run(sc Scenario, opts Options) (*Result, error) {
	sc = resolve(sc, opts)
	p := DefaultParams()
	if sc.Params != nil {
		sc.Params(&p)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	records := sc.records()
	res := &Result{Report: Report{Scenario: sc.Name, Policy: sc.Policy, Plots: []string{}, Settings: Settings{
		Nodes: sc.Nodes, Records: records, DurationS: sc.Duration.Seconds(), WarmupS: sc.Warmup.Seconds(), Splits: sc.Ranges,
		ValueBytes: sc.ValueBytes, ReadFraction: sc.ReadFraction, Workload: sc.Workload, OpsPerSec: sc.OpsPerSec,
		Diurnal: sc.Diurnal, Seed: opts.Seed, Params: p}}}
	dist, err := newDist(sc, records)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	ons := []bool{true}
	if sc.Policy != "" && !opts.OnlyPolicyOn {
		ons = append(ons, false)
	}
	if sc.Policy != "" && opts.OnlyPolicyOff {
		ons = []bool{false}
	}
	var wallStart time.Time
	if opts.Wall != nil {
		wallStart = opts.Wall()
	}
	for _, on := range ons {
		r, err := newRun(sc, p, dist, opts.Seed, on)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		if opts.Progress != nil {
			r.loop.Every(time.Minute, func() bool {
				opts.Progress(r.loop.Now().Sub(epoch), len(r.decided))
				return r.loop.Now().Before(r.end)
			})
		}
		rep, decs := r.run()
		res.Report.Runs = append(res.Report.Runs, rep)
		res.Decisions = append(res.Decisions, decs)
		res.Report.Sim.Events += r.loop.Events()
		res.Report.Sim.Snapshots += r.c.snapshots
		res.Report.Sim.Decisions += len(decs)
	}
	if opts.Wall != nil {
		wall := opts.Wall().Sub(wallStart).Seconds()
		res.Report.Sim.WallS = math.Round(wall*1000) / 1000
		if wall > 0 {
			res.Report.Sim.DecisionsPerSec = math.Round(float64(res.Report.Sim.Decisions)/wall*10) / 10
		}
	}
	return res, nil
}

func resolve(sc Scenario, opts Options) Scenario {
	if opts.Nodes > 0 {
		sc.Nodes = opts.Nodes
	}
	if opts.Ranges > 0 {
		sc.Ranges = opts.Ranges
	}
	if opts.Duration > 0 {
		sc.Duration = opts.Duration
	}
	if opts.Workload != "" {
		sc.Workload = opts.Workload
	}
	if sc.RecordsPerRange <= 0 {
		sc.RecordsPerRange = 1000
	}
	if sc.ValueBytes == 0 {
		sc.ValueBytes = 256
	}
	if sc.Warmup == 0 {
		sc.Warmup = 5 * time.Second
	}
	if len(sc.Tenants) > 0 {
		sc.Ranges, sc.Workload = 0, "tenants"
		for _, t := range sc.Tenants {
			sc.Ranges += t.Ranges
		}
	}
	if sc.Ramp != nil {
		sc.Duration, sc.Warmup = sc.Ramp.duration(), sc.Ramp.Settle
	}
	return sc
}

// records is the records of sc's key space.
func (sc Scenario) records() int64 {
	if len(sc.Tenants) > 0 {
		_, bounds := tenantsDist(sc.Tenants)
		return bounds[len(bounds)-1]
	}
	return int64(sc.Ranges) * sc.RecordsPerRange
}

func newDist(sc Scenario, records int64) (workload.Dist, error) {
	if len(sc.Tenants) > 0 {
		d, _ := tenantsDist(sc.Tenants)
		return d, nil
	}
	if sc.Workload == "hotspot" {
		hot, ops := sc.HotRecords, sc.HotOps
		if hot <= 0 {
			hot = max(1, records/1000)
		}
		if ops <= 0 {
			ops = 0.9
		}
		return workload.Hotspot{N: records, Hot: min(hot, records), Ops: ops}, nil
	}
	return workload.New(sc.Workload, records)
}

// run is one simulated run: the cluster, the autopilot driven inline on the virtual clock, and what
// it records.
type run struct {
	sc   Scenario
	p    Params
	on   bool
	loop *des.Loop
	c    *Cluster
	ap   *autopilot.Autopilot
	end  time.Time

	tasks    []*task
	emptying []emptying
	killed   []uint64
	taskSeq  uint64

	pending, wantReactive bool      // a wake is scheduled; it is to run a reactive round
	last                  time.Time // the last snapshot the executor reconciled on

	series   []Point
	ramp     *rampRec // the SLO search's steps (Scenario.Ramp)
	events   []EventMark
	hist     latencyHist
	ops, err float64
	decided  []Decision
	stream   *streamJob // Scenario.Stream
}

func newRun(sc Scenario, p Params, dist workload.Dist, seed uint64, on bool) (*run, error) {
	loop := des.New(epoch)
	var rate workload.Rate = workload.Constant(sc.OpsPerSec)
	if sc.Diurnal > 0 {
		rate = workload.Diurnal{Mean: sc.OpsPerSec, Amplitude: sc.Diurnal, Period: sc.Duration}
	}
	if sc.Ramp != nil {
		rate = sc.Ramp
	}
	spec := clusterSpec{nodes: sc.Nodes, ranges: sc.Ranges, rf: 3, scatter: sc.Scatter,
		records: sc.records(), valueBytes: sc.ValueBytes, dist: dist, rate: rate,
		readFrac: sc.ReadFraction, gatherLeaders: sc.GatherLeaders, replicaReads: sc.ReplicaReads, empty: sc.Empty,
		zones: sc.Zones, leadZone: sc.LeadZone, leadBy: sc.LeadBy, metaOn: sc.MetaOn,
		pace: pacing{share: sc.Pace, rate: sc.Offered, warmup: sc.Warmup, probe: sc.Probe}}
	if !on {
		spec.learners = sc.OffLearners
	}
	if len(sc.Tenants) > 0 {
		_, spec.bounds = tenantsDist(sc.Tenants)
	}
	c := newCluster(p, loop, seed, spec)
	r := &run{sc: sc, p: p, on: on, loop: loop, c: c, end: epoch.Add(sc.Duration), hist: latencyHist{}}
	if m := sc.Ramp; m != nil {
		r.ramp = newRampRec(m)
		for i := range m.Rates {
			loop.At(epoch.Add(m.Settle+time.Duration(i+1)*(m.Warm+m.Measure)-time.Millisecond), func() { r.ramp.end(i, c, len(r.decided)) })
		}
	}
	cfg := autopilot.Config{Executor: executor.Config{Inline: true, OnProgress: r.scheduleReactive},
		DecisionLogSize: 1 << 16, OnDecision: r.decide}
	if sc.Autopilot != nil {
		sc.Autopilot(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	r.ap = autopilot.New(c, c, cfg)
	for name, v := range sc.Pin {
		if err := r.ap.SetPolicy(name, v); err != nil {
			return nil, err
		}
	}
	if sc.Policy != "" {
		if err := r.ap.SetPolicy(sc.Policy, on); err != nil {
			return nil, err
		}
	}
	if sc.Setup != nil {
		sc.Setup(r.ap)
	}
	c.maxSnaps = cfg.Executor.MaxSnapshotsPerNode
	c.hints = r.ap.Policies().Enabled(policy.NameReadHints)
	if r.ap.Policies().Enabled(policy.NameLoadSplit) {
		c.sampleMin = cfg.Policies.LoadSplit.QPSThreshold / 2
	}
	c.onLand = r.scheduleReconcile
	if sc.Stream {
		r.stream = newStreamJob(c, streamReroute.Seconds(), sc.Warmup.Seconds())
	}
	loop.Every(p.Heartbeat, func() bool { r.heartbeat(); return loop.Now().Before(r.end) })
	loop.Every(cfg.Interval, func() bool { r.cycle(false); return loop.Now().Before(r.end) })
	for _, e := range sc.Events {
		loop.At(epoch.Add(e.At), func() { r.fire(e) })
	}
	return r, nil
}

func (r *run) run() (RunReport, []Decision) {
	r.c.heartbeat(nil) // the load before the first report
	r.loop.RunUntil(r.end)
	return r.report(), r.decisions()
}

// cycle is one autopilot round on a fresh snapshot (reactive: the Reactive policies only), followed
// by a reconciliation on the same snapshot, as Autopilot.Step does: what the round submitted is
// issued at once, as the executor's goroutine would on its poke.
func (r *run) cycle(reactive bool) {
	snap := r.c.Snapshot()
	ctx := context.Background()
	if reactive {
		r.ap.TickReactive(ctx, snap)
	} else {
		r.wantReactive = false // this round asks every policy; progress from here on asks again
		r.ap.Tick(ctx, snap)
	}
	r.last = snap.Now
	r.ap.Executor().Reconcile(snap)
}

// wake asks for a reconciliation (a step landed) and, if reactive, a reactive round (an operator made
// progress): both on one snapshot, at once or ReconcileGap after the last one, so that the steps
// landing and the progress reported meanwhile share it. The gap bounds the snapshots per second the
// simulation pays for; the real executor reconciles when a call returns.
func (r *run) wake(reactive bool) {
	r.wantReactive = r.wantReactive || reactive
	if r.pending {
		return
	}
	r.pending = true
	r.loop.At(r.last.Add(r.p.ReconcileGap), r.woken)
}

// woken is a wake's reconciliation. Progress that reconciliation reports runs a reactive round at
// the same instant, not a gap later: the real executor reconciles as a step's call returns and its
// progress report runs the reactive round at once (the loop's 100-ms floor is between reactive
// rounds), so the next step of sequential work (a join's next move) is planned with no gap.
func (r *run) woken() {
	reactive := r.wantReactive
	r.wantReactive = false
	if !r.last.Before(r.loop.Now()) {
		// A round ran at this instant: it asked every policy and reconciled. Progress its
		// reconciliation reported asks for a reactive round a gap later.
		r.pending = false
		if reactive {
			r.wake(true)
		}
		return
	}
	if reactive {
		r.cycle(true)
	} else {
		snap := r.c.Snapshot()
		r.last = snap.Now
		r.ap.Executor().Reconcile(snap) // progress here only flags wantReactive: pending is set
		if r.wantReactive {
			r.wantReactive = false
			r.cycle(true)
		}
	}
	r.pending = false
	if r.wantReactive {
		r.wake(true)
	}
}

func (r *run) scheduleReconcile() {
	if len(r.emptying) > 0 {
		r.endTasks()
	}
	r.wake(false)
}
func (r *run) scheduleReactive() { r.wake(true) }

func (r *run) decide(e decisions.Entry) {
	r.decided = append(r.decided, Decision{Entry: e, Finished: r.loop.Now()})
}

// heartbeat moves the background tasks on, reports the load, and records the second.
func (r *run) heartbeat() {
	now := r.loop.Now()
	changed := false
	for _, t := range r.tasks {
		if !t.running && (r.c.leads(t.node) == 0 || now.Sub(t.since) >= r.p.TaskWait) {
			t.running, t.since, changed = true, now, true
			r.loop.After(t.runFor, func() { r.finishTask(t) })
		}
	}
	if changed {
		r.c.setTasks(r.tasks)
	}
	s := r.c.heartbeat(r.tasks)
	el := now.Sub(epoch)
	r.series = append(r.series, Point{T: el.Seconds(), Ops: int64(math.Round(s.ops * r.p.Heartbeat.Seconds())),
		Errors: int64(math.Round(s.errors * r.p.Heartbeat.Seconds())), P50Ms: ms(s.p50), P99Ms: ms(s.p99),
		CPU: math.Round(s.cpuCores*100) / 100, Nodes: s.nodes, HitRatio: report.ClusterHitRatio(s.nodes)})
	if r.ramp != nil {
		r.ramp.add(el, s, r.p.Heartbeat.Seconds())
	}
	if r.stream != nil {
		r.stream.count(r.c, r.c.rate.At(now.Sub(r.c.start)), r.p.Heartbeat.Seconds(), el > r.sc.Warmup)
		if el > r.sc.Warmup && el.Seconds()-r.stream.winFrom >= streamWindow {
			r.stream.closeWindow(el.Seconds())
		}
	}
	if el > r.sc.Warmup {
		r.ops += s.ops * r.p.Heartbeat.Seconds()
		r.err += s.errors * r.p.Heartbeat.Seconds()
		for i := range s.parts {
			s.parts[i].Weight *= r.p.Heartbeat.Seconds()
		}
		r.hist.add(s.parts)
	}
}

func (r *run) finishTask(t *task) {
	for i, x := range r.tasks {
		if x == t {
			r.tasks = append(r.tasks[:i], r.tasks[i+1:]...)
			break
		}
	}
	n := r.c.node(t.node)
	n.taskDone[t.kind] = r.loop.Now()
	r.c.setTasks(r.tasks)
	for i := range r.events {
		if r.events[i].Task && r.events[i].Label == string(Compaction) && strings.HasSuffix(r.events[i].What, fmt.Sprintf("n%d", t.node)) {
			r.events[i].EndT = r.loop.Now().Sub(epoch).Seconds()
		}
	}
}

// fire runs a scenario event.
func (r *run) fire(e Event) {
	at := r.loop.Now().Sub(epoch).Seconds()
	mark := EventMark{T: at, EndT: at, Label: string(e.Do)}
	what, err := r.do(e)
	mark.What = string(e.Do)
	if what != "" {
		mark.What += " " + what
	}
	if err != nil {
		mark.Error = err.Error()
	}
	mark.Task = e.Do == Compaction || e.Do == Decommission
	mark.Unfinished = e.Do == Decommission && err == nil // until endTasks sees the node empty
	r.events = append(r.events, mark)
}

// emptying is a decommission event waiting for its node to hold no user replica.
type emptying struct {
	node        uint64
	event, held int
}

// endTasks ends the decommission events whose nodes hold no user replica any more (checked when a
// step lands, as the real runner polls the node).
func (r *run) endTasks() {
	out := r.emptying[:0]
	for _, e := range r.emptying {
		if r.c.userReplicas(e.node) > 0 {
			out = append(out, e)
			continue
		}
		m := &r.events[e.event]
		m.EndT, m.Unfinished = r.loop.Now().Sub(epoch).Seconds(), false
		m.What += fmt.Sprintf(": %d replicas moved off in %.1fs", e.held, m.EndT-m.T)
	}
	r.emptying = out
}

func (r *run) do(e Event) (string, error) {
	c := r.c
	switch e.Do {
	case KillLeader:
		if len(c.order) == 0 || c.order[0].leader == 0 {
			return "", fmt.Errorf("the first range has no leader")
		}
		id := c.order[0].leader
		c.kill(id)
		r.killed = append(r.killed, id)
		return fmt.Sprintf("n%d", id), nil
	case Restart:
		var done []string
		for _, id := range r.killed {
			c.restart(id)
			done = append(done, fmt.Sprintf("n%d", id))
		}
		r.killed = nil
		return strings.Join(done, ","), nil
	case JoinNodes, JoinNode:
		k := int(e.N)
		switch {
		case e.Do == JoinNode:
			k = 1
		case e.N < 1:
			k = int(math.Ceil(e.N * float64(len(c.nodes))))
		}
		first := uint64(len(c.nodes) + 1)
		for i := 0; i < k; i++ {
			c.addNode()
		}
		r.scheduleReactive() // a new node's first load report pokes the autopilot
		return fmt.Sprintf("n%d..n%d", first, len(c.nodes)), nil
	case Decommission:
		// As bench/scenario's: the last node holding user replicas; the event lasts until it
		// holds none (endTasks).
		var n *simNode
		for _, x := range c.nodes {
			if x.up && !x.gone && c.userReplicas(x.id) > 0 {
				n = x
			}
		}
		if n == nil {
			return "", fmt.Errorf("no live node holds a user replica")
		}
		n.decomm = true
		r.emptying = append(r.emptying, emptying{node: n.id, event: len(r.events), held: c.userReplicas(n.id)})
		return fmt.Sprintf("n%d", n.id), nil
	case Drain:
		id := r.busiest()
		c.node(id).draining = true
		return fmt.Sprintf("n%d", id), nil
	case Compaction:
		id := r.busiest()
		r.taskSeq++
		r.tasks = append(r.tasks, &task{node: id, id: r.taskSeq, kind: "compaction", runFor: seconds(e.N), since: r.loop.Now()})
		c.node(id).ledAtReq = c.ledBy(id)
		c.setTasks(r.tasks)
		return fmt.Sprintf("n%d", id), nil
	}
	return "", fmt.Errorf("unknown action %q", e.Do)
}

// busiest is the live node leading most user ranges (lowest ID on ties).
func (r *run) busiest() uint64 {
	var best uint64
	most := -1
	for _, n := range r.c.nodes {
		if k := r.c.leads(n.id); n.up && k > most {
			best, most = n.id, k
		}
	}
	return best
}

func (r *run) report() RunReport {
	secs := (r.sc.Duration - r.sc.Warmup).Seconds()
	rep := RunReport{PolicyOn: r.on, Series: r.series, Events: r.events, Summary: Summary{Ops: int64(math.Round(r.ops)),
		Errors: int64(math.Round(r.err)), P50Ms: ms(r.hist.quantile(0.5)), P99Ms: ms(r.hist.quantile(0.99))}}
	if r.events == nil {
		rep.Events = []EventMark{}
	}
	if r.sc.ReplicaReads {
		rep.Reads = r.c.readReport()
	}
	if r.stream != nil {
		if r.stream.win.events > 0 {
			r.stream.closeWindow(r.sc.Duration.Seconds())
		}
		rep.Stream = r.stream.report()
	}
	if r.ramp != nil {
		steps, slo := r.ramp.report()
		rep.Steps, rep.AtSLO = steps, &slo
	}
	if secs > 0 {
		rep.Summary.Throughput = math.Round(r.ops/secs*10) / 10
	}
	rep.Operators = map[string]OperatorTimes{}
	for _, d := range r.decided {
		if d.Status != decisions.StatusSucceeded || d.Kind == "note" {
			continue
		}
		s := d.Finished.Sub(d.Time).Seconds()
		t := rep.Operators[d.Kind]
		t.MeanS = (t.MeanS*float64(t.Count) + s) / float64(t.Count+1)
		t.Count++
		t.MaxS = max(t.MaxS, s)
		rep.Operators[d.Kind] = t
	}
	for k, t := range rep.Operators {
		t.MeanS, t.MaxS = math.Round(t.MeanS*1000)/1000, math.Round(t.MaxS*1000)/1000
		rep.Operators[k] = t
	}
	return rep
}

// decisions is the run's decision log by ID: every finished decision with its measurement (from
// the log, which measures a window after the end), then the operators still running.
func (r *run) decisions() []Decision {
	byID := map[uint64]decisions.Entry{}
	for _, e := range r.ap.Decisions().Entries() {
		byID[e.ID] = e
	}
	out := make([]Decision, 0, len(r.decided))
	seen := map[uint64]bool{}
	for _, d := range r.decided {
		if e, ok := byID[d.ID]; ok {
			d.Measured, d.Throughput, d.Notes = e.Measured, e.Throughput, e.Notes
		}
		seen[d.ID] = true
		out = append(out, d)
	}
	for _, e := range r.ap.Decisions().Entries() {
		if !seen[e.ID] {
			out = append(out, Decision{Entry: e})
		}
	}
	for i := range out {
		steps := make([]decisions.StepTiming, len(out[i].Steps))
		for j, s := range out[i].Steps {
			steps[j] = decisions.StepTiming{Step: s.Step, Error: s.Error}
		}
		out[i].Steps = steps
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
