package sim

import (
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/autopilot/policy"
)

// DefaultTolerance is the relative error within which a simulated figure counts as matching the real
// one (the simulator's goal: operator times and throughput within 15 %).
const DefaultTolerance = 0.15

// calibrationBin is the width of the throughput bins compared after the warm-up.
const calibrationBin = 10 * time.Second

// sequenceLength is how many decisions of the two logs are compared in order.
const sequenceLength = 20

// CalibrateOptions choose the real runs compared and the simulation's seed.
type CalibrateOptions struct {
	Seed uint64
	// Tolerance is the relative error allowed per figure (0: DefaultTolerance).
	Tolerance float64
	// On and Off name the real runs (a variant, or policy=on / policy=off) compared with the
	// simulation's policy-on and policy-off runs; empty: the first run with the policy on, resp. off.
	On, Off string
}

// Calibration is a simulated scenario set against a real run of it: each figure's real and simulated
// value and relative error, the throughput in 10-s bins, and the decision sequences side by side.
type Calibration struct {
	Scenario  string  `json:"scenario"`
	RealOn    string  `json:"real_on"`
	RealOff   string  `json:"real_off,omitempty"`
	Tolerance float64 `json:"tolerance"`
	// OfferedOpsPerS is the simulation's offered load: the real policy-on run's throughput after the
	// warm-up and before its first event (a closed-loop client's rate, measured, not assumed).
	OfferedOpsPerS float64 `json:"offered_ops_per_s"`
	// OffOfferedOpsPerS is the policy-off simulation's, from the real policy-off run likewise.
	OffOfferedOpsPerS float64  `json:"off_offered_ops_per_s,omitempty"`
	Figures           []Figure `json:"figures"`
	Bins              []Bin    `json:"throughput_bins"`
	// Caches are each node's block-cache misses and disk operations per second in the same bins,
	// when the real report sampled its nodes (the simulation's loopback host always does).
	Caches   []CacheBin `json:"cache_bins,omitempty"`
	Sequence Sequence   `json:"sequence"`
	Settings []string   `json:"settings"`
	Sim      *Result    `json:"-"`
}

// Figure is one compared figure. Error is (sim − real) / real; Within says whether |Error| is within
// the tolerance.
type Figure struct {
	Name   string  `json:"name"`
	Real   float64 `json:"real"`
	Sim    float64 `json:"sim"`
	Error  float64 `json:"error"`
	Within bool    `json:"within"`
	Note   string  `json:"note,omitempty"`
}

// Bin is the policy-on runs' mean throughput over [FromS, ToS).
type Bin struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	Real  float64 `json:"real"`
	Sim   float64 `json:"sim"`
	Error float64 `json:"error"`
	// Within: |Error| within the tolerance.
	Within bool `json:"within"`
}

// CacheBin is one node's mean block-cache misses and disk operations per second over [FromS, ToS), real
// and simulated. A real miss is any block's (index and filter blocks too), a simulated one a read's
// data block: the gap between them is what the cache model lacks.
type CacheBin struct {
	FromS      float64 `json:"from_s"`
	ToS        float64 `json:"to_s"`
	Node       uint64  `json:"node"`
	RealMisses float64 `json:"real_misses_per_s"`
	SimMisses  float64 `json:"sim_misses_per_s"`
	RealDisk   float64 `json:"real_disk_ops_per_s"`
	SimDisk    float64 `json:"sim_disk_ops_per_s"`
	// RealReads and SimReads are the read operations among them (the real run's: 0 when its report
	// predates recording them).
	RealReads float64 `json:"real_disk_reads_per_s"`
	SimReads  float64 `json:"sim_disk_reads_per_s"`
}

// Sequence is the first decisions of the policy-on runs from the scenario's first event on, as
// "policy kind"; FirstDifference is the index of the first that differs (-1: none).
type Sequence struct {
	Real            []string `json:"real"`
	Sim             []string `json:"sim"`
	FirstDifference int      `json:"first_difference"`
}

// Calibrate simulates the scenario of real (the same name, nodes, ranges, records, read fraction,
// duration, warm-up and event times scaled as the real runner scaled them, offered load as measured)
// with the policy on and, if real has a policy-off run, off, and compares the figures.
func Calibrate(real *RealReport, opts CalibrateOptions) (*Calibration, error) {
	sc, ok := Lookup(real.Scenario)
	if !ok {
		return nil, fmt.Errorf("sim: calibrate: no simulated scenario %q (shoal sim list names them)", real.Scenario)
	}
	on, off, err := pickRuns(real, opts)
	if err != nil {
		return nil, err
	}
	base := sc
	sc, offered, err := fitScenario(base, real, on, opts.Seed)
	if err != nil {
		return nil, err
	}
	res, err := Run(sc, Options{Seed: opts.Seed, OnlyPolicyOn: true})
	if err != nil {
		return nil, err
	}
	var offOffered float64
	if off != nil {
		// Each simulated run at its real run's own load: on a shared machine the two real runs'
		// steady states can differ by half.
		scOff, o, err := fitScenario(base, real, off, opts.Seed)
		if err != nil {
			return nil, err
		}
		resOff, err := Run(scOff, Options{Seed: opts.Seed, OnlyPolicyOff: true})
		if err != nil {
			return nil, err
		}
		offOffered = o
		res.Report.Runs = append(res.Report.Runs, resOff.Report.Runs...)
		res.Decisions = append(res.Decisions, resOff.Decisions...)
	}
	tol := opts.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	cal := &Calibration{Scenario: sc.Name, RealOn: on.Label(), Tolerance: tol, OfferedOpsPerS: round3(offered),
		OffOfferedOpsPerS: round3(offOffered), Sim: res,
		Settings: []string{fmt.Sprintf("%d nodes, %d ranges, %d records, %.0f %% reads, %v (warm-up %v), events at %s",
			sc.Nodes, sc.Ranges, int64(sc.Ranges)*sc.RecordsPerRange, 100*sc.ReadFraction, sc.Duration, sc.Warmup, sc.Schedule())}}
	if h := hostOf(sc); h.on() {
		cal.Settings = append(cal.Settings, fmt.Sprintf("a closed loop of %d threads, think time %.3f ms (fitted to the real run before its first event), "+
			"disks of %.0f IOPS, block caches of %.1f MiB", h.Threads, h.Think.Seconds()*1000, h.IOPS, h.CacheBytes/(1<<20)))
	}
	simOn := res.Report.Runs[0]
	cal.figure("throughput, policy on (ops/s)", on.Summary.Throughput, simOn.Summary.Throughput, "")
	if off != nil {
		cal.RealOff = off.Label()
		simOff := res.Report.Runs[1]
		cal.figure("throughput, policy off (ops/s)", off.Summary.Throughput, simOff.Summary.Throughput, "")
		cal.figure("p99 ratio on/off", ratio(on.Summary.P99Ms, off.Summary.P99Ms), ratio(simOn.Summary.P99Ms, simOff.Summary.P99Ms),
			fmt.Sprintf("p99 real %.1f / %.1f ms, simulated %.3f / %.3f ms", on.Summary.P99Ms, off.Summary.P99Ms,
				simOn.Summary.P99Ms, simOff.Summary.P99Ms))
	}
	cal.bins(on.Series, simOn.Series, sc.Warmup, sc.Duration)
	cal.caches(on.Series, simOn.Series)
	cal.events(on, simOn, offered)
	cal.decisions(on, res, sc)
	return cal, nil
}

// pickRuns finds the real runs to compare: by label, or the first with the policy on (off).
func pickRuns(real *RealReport, opts CalibrateOptions) (on, off *RealRun, err error) {
	find := func(label string, policyOn bool) *RealRun {
		for i := range real.Runs {
			r := &real.Runs[i]
			if label != "" && r.Label() == label || label == "" && r.PolicyOn == policyOn {
				return r
			}
		}
		return nil
	}
	if on = find(opts.On, true); on == nil {
		return nil, nil, fmt.Errorf("sim: calibrate: the real report has no run %q with the policy on", opts.On)
	}
	off = find(opts.Off, false)
	if opts.Off != "" && off == nil {
		return nil, nil, fmt.Errorf("sim: calibrate: the real report has no run %q", opts.Off)
	}
	return on, off, nil
}

// atRealTimes moves each event to the time its real counterpart fired, the i-th of an action to the
// real run's i-th event of that label: a report written under an earlier schedule of the scenario
// keeps its own times.
func atRealTimes(events []Event, real []EventMark) {
	seen := map[Action]int{}
	for i := range events {
		n := seen[events[i].Do]
		seen[events[i].Do]++
		for _, re := range real {
			if re.Label != string(events[i].Do) {
				continue
			}
			if n == 0 {
				events[i].At = time.Duration(re.T * float64(time.Second)).Round(time.Millisecond)
				break
			}
			n--
		}
	}
}

// fitScenario sizes sc as the real run was and sets its offered load to the real run's throughput
// before its first event after the warm-up.
func fitScenario(sc Scenario, real *RealReport, on *RealRun, seed uint64) (Scenario, float64, error) {
	st := real.Settings
	if st.DurationS > 0 {
		d := time.Duration(st.DurationS * float64(time.Second))
		f := float64(d) / float64(sc.Duration)
		sc.Events = append([]Event(nil), sc.Events...)
		for i := range sc.Events {
			sc.Events[i].At = time.Duration(float64(sc.Events[i].At) * f) // as the real runner scales them
		}
		sc.Probe = time.Duration(float64(sc.Probe) * f)
		sc.Duration = d
	}
	atRealTimes(sc.Events, on.Events)
	// Paced as the real run was, at the rate it offered; a report of a closed loop, not at all.
	sc.Pace, sc.Offered = st.Pace, st.OfferedOps
	if sc.Pace <= 0 && sc.Offered <= 0 {
		sc.Probe = 0
	}
	if st.WarmupS > 0 {
		sc.Warmup = time.Duration(st.WarmupS * float64(time.Second))
	}
	if st.Nodes > 0 {
		sc.Nodes = st.Nodes
	}
	if st.Splits > 0 {
		sc.Ranges = st.Splits
	}
	if st.Records > 0 && sc.Ranges > 0 {
		sc.RecordsPerRange = st.Records / int64(sc.Ranges)
	}
	if st.ReadFraction > 0 {
		sc.ReadFraction = st.ReadFraction
	}
	until := sc.Duration.Seconds()
	for _, e := range on.Events {
		if e.T > st.WarmupS {
			until = e.T
			break
		}
	}
	var sum float64
	var n int
	for _, p := range on.Series {
		if p.T > st.WarmupS && p.T <= until+0.5 {
			sum += float64(p.Ops)
			n++
		}
	}
	if n == 0 || sum <= 0 {
		return sc, 0, fmt.Errorf("sim: calibrate: the real %s run served nothing between its warm-up and its first event", on.Label())
	}
	sc.OpsPerSec = sum / float64(n)
	from, target := st.WarmupS, sc.OpsPerSec
	if sc.Pace > 0 || sc.Offered > 0 {
		// Paced after the warm-up, the real clients show their closed loop only in it: fit the
		// think time to its second half, what the real pacer measures too.
		from, until = st.WarmupS/2, st.WarmupS
		if target = meanOps(on.Series, from, until); target <= 0 {
			return sc, 0, fmt.Errorf("sim: calibrate: the real %s run served nothing in its warm-up's second half", on.Label())
		}
	}
	if err := fitThink(&sc, st.Threads, target, from, until, on.PolicyOn, seed); err != nil {
		return sc, 0, err
	}
	return sc, sc.OpsPerSec, nil
}

// fitThink, for a scenario whose clients are a closed loop (Params.Host), sets the threads to the
// real run's and fits their think time so that the simulated run serves the real one's throughput
// from from to until (the warm-up to the first event; a paced run's warm-up's second half): the one figure taken from each run, as the
// offered load of an open loop is. A closed loop serves X = N / (Z + R): with the response time R
// of the last run, Z' = N/target − R is the next guess (a fixed point that converges in a few runs
// of the scenario cut at until while R moves little with Z); if even Z = 0 serves less than the
// target, the stations bind and Z stays 0.
func fitThink(sc *Scenario, threads int, target, from, until float64, on bool, seed uint64) error {
	h := hostOf(*sc)
	if !h.on() {
		return nil
	}
	if threads <= 0 {
		threads = h.Threads
	}
	base := sc.Params
	with := func(think float64) func(*Params) {
		return func(p *Params) {
			base(p)
			h := *p.Host
			h.Threads, h.Think = threads, seconds(think)
			p.Host = &h
		}
	}
	n := float64(threads)
	z := 0.0
	for i := 0; i < 8; i++ {
		cut := *sc
		cut.Params, cut.Duration = with(z), seconds(math.Ceil(until))
		res, err := Run(cut, Options{Seed: seed, OnlyPolicyOn: on, OnlyPolicyOff: !on})
		if err != nil {
			return err
		}
		x := meanOps(res.Report.Runs[0].Series, from, until)
		if x <= 0 || (z == 0 && x <= target) || math.Abs(x-target) <= thinkFitTolerance*target {
			break
		}
		z = math.Max(0, z+n/target-n/x)
	}
	sc.Params = with(z)
	return nil
}

// hostOf is the scenario's host model (nil: none).
func hostOf(sc Scenario) *Host {
	p := DefaultParams()
	if sc.Params != nil {
		sc.Params(&p)
	}
	return p.Host
}

// thinkFitTolerance is how close fitThink brings the simulated throughput before the first event
// to the real one.
const thinkFitTolerance = 0.005

// meanOps is the mean of the series' seconds in (from, to].
func meanOps(ps []Point, from, to float64) float64 {
	var sum float64
	var n int
	for _, p := range ps {
		if p.T > from && p.T <= to {
			sum += float64(p.Ops)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func (c *Calibration) figure(name string, real, sim float64, note string) {
	f := Figure{Name: name, Real: round3(real), Sim: round3(sim), Note: note}
	real, sim = f.Real, f.Sim // the error of the figures as shown
	switch {
	case real == 0 && sim == 0:
		f.Within = true
	case real == 0:
		f.Error, f.Note = 1, strings.TrimPrefix(note+"; the real figure is 0", "; ")
	default:
		f.Error = round3((sim - real) / real)
		f.Within = math.Abs(f.Error) <= c.Tolerance
	}
	c.Figures = append(c.Figures, f)
}

// bins compares the policy-on runs' throughput in 10-s bins after the warm-up, and adds the worst
// bin as a figure.
func (c *Calibration) bins(real, sim []Point, warmup, d time.Duration) {
	worst := -1
	for from := warmup.Seconds(); from < d.Seconds(); from += calibrationBin.Seconds() {
		to := math.Min(from+calibrationBin.Seconds(), d.Seconds())
		b := Bin{FromS: round3(from), ToS: round3(to), Real: round3(meanOps(real, from, to)), Sim: round3(meanOps(sim, from, to))}
		if b.Real > 0 {
			b.Error = round3((b.Sim - b.Real) / b.Real)
		}
		b.Within = math.Abs(b.Error) <= c.Tolerance
		c.Bins = append(c.Bins, b)
		if worst < 0 || math.Abs(b.Error) > math.Abs(c.Bins[worst].Error) {
			worst = len(c.Bins) - 1
		}
	}
	if worst >= 0 {
		b := c.Bins[worst]
		c.figure(fmt.Sprintf("throughput, worst 10-s bin, policy on (%.0f-%.0f s)", b.FromS, b.ToS), b.Real, b.Sim, "")
	}
}

// caches compares each node's misses and disk operations per second in the bins of bins, if the
// real series sampled its nodes.
func (c *Calibration) caches(real, sim []Point) {
	ids := map[uint64]bool{}
	for _, p := range real {
		for _, n := range p.Nodes {
			if n.Node != 0 {
				ids[n.Node] = true
			}
		}
	}
	for _, b := range c.Bins {
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			r, s := nodeRates(real, id, b.FromS, b.ToS), nodeRates(sim, id, b.FromS, b.ToS)
			c.Caches = append(c.Caches, CacheBin{FromS: b.FromS, ToS: b.ToS, Node: id, RealMisses: round3(r.misses), SimMisses: round3(s.misses),
				RealDisk: round3(r.disk), SimDisk: round3(s.disk), RealReads: round3(r.reads), SimReads: round3(s.reads)})
		}
	}
}

// nodeRates is node id's mean misses, disk operations and disk reads per second over the points in
// [from, to).
func nodeRates(ps []Point, id uint64, from, to float64) (out struct{ misses, disk, reads float64 }) {
	var n float64
	prev := 0.0
	for _, p := range ps {
		dt := p.T - prev
		prev = p.T
		if p.T <= from || p.T > to || dt <= 0 {
			continue
		}
		n += dt
		for _, s := range p.Nodes {
			if s.Node == id {
				out.misses += float64(s.Misses)
				out.disk += float64(s.DiskOps)
				out.reads += float64(s.DiskReads)
			}
		}
	}
	if n > 0 {
		out.misses, out.disk, out.reads = out.misses/n, out.disk/n, out.reads/n
	}
	return out
}

// dec is one decision of a run's log, timed from the scenario's first event after the warm-up.
type dec struct {
	at                 float64
	policy, kind, what string
	ok                 bool    // it succeeded
	took               float64 // proposal to its final status (simulated runs only; -1: unknown)
}

// realDecisions are the real policy-on run's decisions from the scenario's first event at start (s):
// the run's decision log, or, in reports written before runs recorded one, the join's timeline.
func realDecisions(on *RealRun, start float64) []dec {
	var out []dec
	add := func(at float64, d RealDecision) {
		if at < start-0.05 { // the log rounds to a tenth
			return
		}
		k := kindOf(d.Operator)
		out = append(out, dec{at: at - start, policy: d.Policy, kind: k, what: d.Policy + " " + k + noteOf(d.Operator),
			ok: d.Status == decisions.StatusSucceeded, took: -1})
	}
	switch {
	case len(on.Decisions) > 0:
		for _, d := range on.Decisions {
			add(d.AtS, d)
		}
	case on.Join != nil:
		for _, d := range on.Join.Timeline {
			add(on.Join.JoinStartS+d.AtS, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// simDecisions are the simulated policy-on run's decisions from the scenario's first event.
func simDecisions(res *Result, start time.Time) []dec {
	var out []dec
	for _, d := range res.Decisions[0] {
		if d.Time.Before(start) {
			continue
		}
		took := -1.0
		if !d.Finished.IsZero() {
			took = d.Finished.Sub(d.Time).Seconds()
		}
		out = append(out, dec{at: d.Time.Sub(start).Seconds(), policy: d.Policy, kind: d.Kind,
			what: d.Policy + " " + d.Kind + noteOf(d.Operator), ok: d.Status == decisions.StatusSucceeded, took: took})
	}
	return out
}

// firstEvent is the scenario's first event after the warm-up, from the run's start (the warm-up's
// end if none).
func firstEvent(sc Scenario) time.Duration {
	for _, e := range sc.Events {
		if e.At > sc.Warmup {
			return e.At
		}
	}
	return sc.Warmup
}

// events compares the policy-on runs' events: how long each task event of the same action took
// (a decommission: until the node held no replica), and after each leader killed, the seconds until
// throughput was back to half the offered load (the election and the clients finding the new leader).
func (c *Calibration) events(on *RealRun, sim RunReport, offered float64) {
	for _, re := range on.Events {
		var se *EventMark
		for i := range sim.Events {
			if sim.Events[i].Label == re.Label && math.Abs(sim.Events[i].T-re.T) < 1 {
				se = &sim.Events[i]
				break
			}
		}
		if se == nil {
			continue
		}
		if re.Task && se.Task && !re.Unfinished && !se.Unfinished {
			c.figure(re.Label+": time to finish (s)", re.EndT-re.T, se.EndT-se.T, re.What)
		}
		if re.Label == string(KillLeader) {
			c.figure("kill leader: seconds below half the offered load", belowHalf(on.Series, re.T, offered),
				belowHalf(sim.Series, se.T, offered), "from the kill to the first second at half the load before it")
		}
	}
}

// belowHalf counts the seconds of series after at until the first that served half of offered.
func belowHalf(series []Point, at, offered float64) float64 {
	for _, p := range series {
		if p.T > at && float64(p.Ops) >= offered/2 {
			return math.Max(0, p.T-1-at)
		}
	}
	return 0
}

// decisions compares what the policy-on runs decided from the scenario's first event after the
// warm-up: counts and durations per operator kind, the join's figures, and the sequence.
func (c *Calibration) decisions(on *RealRun, res *Result, sc Scenario) {
	first := firstEvent(sc)
	real, sim := realDecisions(on, first.Seconds()), simDecisions(res, epoch.Add(first))
	count := func(ds []dec) map[string]int {
		m := map[string]int{}
		for _, d := range ds {
			m[d.kind]++
		}
		return m
	}
	rc, scount := count(real), count(sim)
	var kinds []string
	for k := range rc {
		kinds = append(kinds, k)
	}
	for k := range scount {
		if _, ok := rc[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		c.figure("decisions: "+k, float64(rc[k]), float64(scount[k]), "")
	}
	for _, k := range kinds {
		if k == "note" {
			continue
		}
		rm, rn := meanDuration(real, k)
		sm, sn := meanDuration(sim, k)
		if rn == 0 && sn == 0 {
			continue
		}
		tm, tn := trueDuration(sim, k)
		c.figure(k+": mean duration (s)", rm, sm, fmt.Sprintf("to the policy's next decision, over %d real and %d simulated; "+
			"simulated proposal to success %.3f s over %d", rn, sn, tm, tn))
	}
	if on.Join != nil {
		c.joinFigures(on, real, sim)
	}
	c.sequence(real, sim)
}

// meanDuration is the mean time of the succeeded operators of kind k, each from its proposal to its
// policy's next decision: a sequential policy (incremental_join, decommission) proposes its next
// operator once the last one ended, so that interval is the operator's time plus a round's delay.
// The log carries no end times (a real report keeps proposals and final statuses only); the
// simulated runs' are derived the same way, their true times given beside.
func meanDuration(ds []dec, k string) (float64, int) {
	var sum float64
	var n int
	for i, d := range ds {
		if d.kind != k || !d.ok {
			continue
		}
		for _, next := range ds[i+1:] {
			if next.policy == d.policy {
				sum += next.at - d.at
				n++
				break
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// trueDuration is the mean time from proposal to success of the simulated operators of kind k.
func trueDuration(ds []dec, k string) (float64, int) {
	var sum float64
	var n int
	for _, d := range ds {
		if d.kind == k && d.ok && d.took >= 0 {
			sum += d.took
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// joinFigures are the join's time and the mean interval between its moves.
func (c *Calibration) joinFigures(on *RealRun, real, sim []dec) {
	moveGap := func(ds []dec) float64 {
		var at []float64
		for _, d := range ds {
			if d.kind == operator.KindMoveReplica && d.policy == policy.NameJoin {
				at = append(at, d.at)
			}
		}
		if len(at) < 2 {
			return 0
		}
		return (at[len(at)-1] - at[0]) / float64(len(at)-1)
	}
	c.figure("join: mean interval between moves (s)", moveGap(real), moveGap(sim), "")
	joinTime := func(ds []dec) float64 {
		var from, to float64 = -1, -1
		for _, d := range ds {
			switch {
			case strings.HasSuffix(d.what, "(joining)") && from < 0:
				from = d.at
			case strings.HasSuffix(d.what, "(joined)"):
				to = d.at
			}
		}
		if from < 0 || to < 0 {
			return 0
		}
		return to - from
	}
	c.figure("join: time to complete (s)", on.Join.JoinS, joinTime(sim), "")
}

// sequence sets the first decisions of both logs side by side.
func (c *Calibration) sequence(real, sim []dec) {
	c.Sequence = Sequence{FirstDifference: -1}
	for i := 0; i < sequenceLength && (i < len(real) || i < len(sim)); i++ {
		var r, s string
		if i < len(real) {
			r = real[i].what
			c.Sequence.Real = append(c.Sequence.Real, r)
		}
		if i < len(sim) {
			s = sim[i].what
			c.Sequence.Sim = append(c.Sequence.Sim, s)
		}
		if r != s && c.Sequence.FirstDifference < 0 {
			c.Sequence.FirstDifference = i
		}
	}
}

// kindOf is the operator kind a decision's operator text starts with ("move-replica r2: ..."), or
// "note" for a decision that is not a range operator ("n4 joined").
func kindOf(op string) string {
	first, _, _ := strings.Cut(op, " ")
	first = strings.TrimSuffix(first, ":")
	switch first {
	case operator.KindAddReplica, operator.KindPromoteLearner, operator.KindMoveReplica, operator.KindRemoveReplica,
		operator.KindTransferLeader, operator.KindSplit, operator.KindMerge:
		return first
	}
	return "note"
}

// noteOf names a note by what it says without its node ("n4 partially joined" → " (partially
// joined)", "mark n3 decommissioned" → " (mark decommissioned)"), so that the sequences compare
// notes by what they say, not by node.
func noteOf(op string) string {
	if kindOf(op) != "note" {
		return ""
	}
	var words []string
	for _, w := range strings.Fields(op) {
		if !isNodeName(w) {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return ""
	}
	return " (" + strings.Join(words, " ") + ")"
}

// isNodeName reports whether w is a node's name: "n" and digits.
func isNodeName(w string) bool {
	if len(w) < 2 || w[0] != 'n' {
		return false
	}
	for _, r := range w[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// WriteText prints the comparison: settings, one line per figure, the bins and the sequences.
func (c *Calibration) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "calibration of %s: real runs %s", c.Scenario, c.RealOn)
	if c.RealOff != "" {
		fmt.Fprintf(w, " / %s", c.RealOff)
	}
	fmt.Fprintf(w, ", tolerance %.0f %%; simulated %s, offered %.0f ops/s", 100*c.Tolerance, strings.Join(c.Settings, "; "), c.OfferedOpsPerS)
	if c.RealOff != "" {
		fmt.Fprintf(w, " / %.0f ops/s", c.OffOfferedOpsPerS)
	}
	fmt.Fprintln(w, " (each real run's before its first event)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tREAL\tSIM\tERROR\tWITHIN\tNOTE")
	for _, f := range c.Figures {
		fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%+.1f %%\t%s\t%s\n", f.Name, f.Real, f.Sim, 100*f.Error, yesNo(f.Within), f.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "throughput by 10-s bin, policy on (ops/s; real / sim, error, within):")
	inside := 0
	for _, b := range c.Bins {
		fmt.Fprintf(w, "  %3.0f-%3.0f s  %7.0f / %7.0f  %+6.1f %%  %s\n", b.FromS, b.ToS, b.Real, b.Sim, 100*b.Error, yesNo(b.Within))
		if b.Within {
			inside++
		}
	}
	fmt.Fprintf(w, "  %d of %d bins within %.0f %%\n", inside, len(c.Bins), 100*c.Tolerance)
	if len(c.Caches) > 0 {
		fmt.Fprintln(w, "per node by 10-s bin (real / sim): block-cache misses per s (real: every block; sim: reads' data blocks), disk operations per s, reads among them:")
		for _, b := range c.Caches {
			fmt.Fprintf(w, "  %3.0f-%3.0f s  n%d  misses %7.0f / %7.0f  disk %5.0f / %5.0f  reads %5.0f / %5.0f\n", b.FromS, b.ToS, b.Node,
				b.RealMisses, b.SimMisses, b.RealDisk, b.SimDisk, b.RealReads, b.SimReads)
		}
	}
	if len(c.Sequence.Real)+len(c.Sequence.Sim) > 0 {
		fmt.Fprintf(w, "first %d decisions from the first event (real | sim):\n", sequenceLength)
		for i := 0; i < len(c.Sequence.Real) || i < len(c.Sequence.Sim); i++ {
			var r, s string
			if i < len(c.Sequence.Real) {
				r = c.Sequence.Real[i]
			}
			if i < len(c.Sequence.Sim) {
				s = c.Sequence.Sim[i]
			}
			mark := " "
			if r != s {
				mark = "≠"
			}
			fmt.Fprintf(w, "  %2d %s %-45s | %s\n", i+1, mark, r, s)
		}
		if c.Sequence.FirstDifference < 0 {
			fmt.Fprintln(w, "  the sequences are identical in kind and order")
		} else {
			fmt.Fprintf(w, "  the sequences first differ at decision %d\n", c.Sequence.FirstDifference+1)
		}
	}
	_, err := fmt.Fprintf(w, "%d of %d figures within %.0f %%\n", c.within(), len(c.Figures), 100*c.Tolerance)
	return err
}

func (c *Calibration) within() int {
	n := 0
	for _, f := range c.Figures {
		if f.Within {
			n++
		}
	}
	return n
}

// Write writes calibration.json and the simulation's files (report.json, decisions.json, plots) into dir.
func (c *Calibration) Write(dir string) error {
	if err := c.Sim.Write(dir); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "calibration.json"), c)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
