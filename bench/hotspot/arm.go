package hotspot

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// experiment is one cluster's run.
type experiment struct {
	o        Options
	c        *benchutil.Cluster
	cl       *client.Client
	w        *workload
	hot      []int            // the hot prefix's ranges (indexes)
	hotNode  uint64           // the node leading them
	metaNode uint64           // the meta range's leader (the autopilot's node)
	slo      time.Duration    // the penalty's (and the policy's)
	ids      map[int]uint64   // range index → range id
	voters   map[int][]uint64 // range index → its voters
	leader   map[int]uint64   // the leader each range is placed on before a hot spot
}

// setUp waits for replication, holds the placement still (every placing policy off but
// hotspot_offload, which observes until an arm says otherwise), splits and loads the ranges, and
// picks the hot prefix: HotRanges ranges with a voter on one node, all led by it.
func (x *experiment) setUp(ctx context.Context) error {
	o := x.o
	o.Progress("waiting for 3 voters on every range")
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, x.cl, 3) }); err != nil {
		return fmt.Errorf("3 voters on every range: %w", err)
	}
	for _, p := range []string{policy.NameMerge, policy.NameLoadSplit, policy.NameShed, policy.NameUsageBalance} {
		if err := x.cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for r := 0; r < o.Ranges; r++ {
		if _, _, err := x.cl.Split(ctx, rangeStart(r)); err != nil {
			return fmt.Errorf("split at %q: %w", rangeStart(r), err)
		}
	}
	// The split ranges keep their parent's three nodes: rebalance spreads them over every node
	// (while they are empty) before it, too, is held still.
	o.Progress("waiting for rebalance to spread the ranges' replicas")
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return x.spread(ctx) }); err != nil {
		return fmt.Errorf("replicas on every node: %w", err)
	}
	if err := x.cl.SetPolicy(ctx, policy.NameRebalance, false); err != nil {
		return fmt.Errorf("switch rebalance off: %w", err)
	}
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, x.cl, 3) }); err != nil {
		return fmt.Errorf("3 voters on every range after the splits: %w", err)
	}
	for _, n := range x.c.Nodes() {
		n.Eng.SetDeviceUnthrottled(true)
	}
	o.Progress(fmt.Sprintf("loading %d ranges of %d keys", o.Ranges, o.KeysPerRange))
	if _, err := (benchutil.Load{Records: o.Ranges * o.KeysPerRange, Batch: 100, Writers: 4,
		Key:    func(i int) []byte { return rangeKey(i/o.KeysPerRange, i%o.KeysPerRange) },
		Values: benchutil.RandomValues(o.ValueBytes, o.Seed)}).Run(ctx, x.cl); err != nil {
		return err
	}
	for _, n := range x.c.Nodes() {
		if err := n.Eng.CompactAll(ctx); err != nil {
			return err
		}
		n.Eng.SetDeviceUnthrottled(false)
	}
	if err := x.cl.SetPolicy(ctx, policy.NameHotspot, true); err != nil {
		return err
	}
	if err := x.setMode(policy.ModeObserve); err != nil {
		return err
	}
	if err := x.pickHot(ctx); err != nil {
		return err
	}
	return x.place(ctx)
}

// pickHot reads the ranges and chooses the hot node (the one with a voter of the most ranges) and
// its first HotRanges ranges; every other range is to be led by the voter leading the fewest.
func (x *experiment) pickHot(ctx context.Context) error {
	rs, err := x.cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	x.ids, x.voters, x.leader = map[int]uint64{}, map[int][]uint64{}, map[int]uint64{}
	held := map[uint64]int{}
	// The meta range's leader runs the autopilot, whose reads of the meta range keep its small
	// cache's disk busy: it is neither the hot node nor given leaderships.
	all, err := x.cl.Ranges(ctx)
	if err != nil {
		return err
	}
	for _, r := range all {
		if r.GetDesc().GetRangeId() == 1 {
			x.metaNode = r.GetLeaderNodeId()
		}
	}
	for _, r := range rs {
		for i := 0; i < x.o.Ranges; i++ {
			if string(r.GetDesc().GetStartKey()) == string(rangeStart(i)) {
				x.ids[i] = r.GetDesc().GetRangeId()
				for _, rep := range r.GetDesc().GetReplicas() {
					if !rep.GetLearner() {
						x.voters[i] = append(x.voters[i], rep.GetNodeId())
						held[rep.GetNodeId()]++
					}
				}
			}
		}
	}
	if len(x.ids) != x.o.Ranges {
		return fmt.Errorf("found %d of the %d ranges", len(x.ids), x.o.Ranges)
	}
	for n, k := range held {
		if n == x.metaNode {
			continue
		}
		if x.hotNode == 0 || k > held[x.hotNode] || k == held[x.hotNode] && n < x.hotNode {
			x.hotNode = n
		}
	}
	leads := map[uint64]int{}
	// rank orders a range's candidate leaders: the meta range's leader last, then by leaderships.
	rank := func(n uint64) int {
		if n == x.metaNode {
			return 1 << 20
		}
		return leads[n]
	}
	for i := 0; i < x.o.Ranges; i++ {
		if len(x.hot) < x.o.HotRanges && slices.Contains(x.voters[i], x.hotNode) {
			x.hot = append(x.hot, i)
			x.leader[i] = x.hotNode
			continue
		}
		var best uint64
		for _, v := range x.voters[i] {
			if v != x.hotNode && (best == 0 || rank(v) < rank(best)) {
				best = v
			}
		}
		x.leader[i] = best
		leads[best]++
	}
	return nil
}

// place moves every range's leadership to its planned node and waits until the ranges show it.
func (x *experiment) place(ctx context.Context) error {
	return benchutil.WaitFor(ctx, 3*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		rs, err := x.cl.Ranges(ctx)
		if err != nil {
			return false
		}
		ok := true
		for _, r := range rs {
			// The meta range stays on the node the experiment leaves out of its arms.
			if r.GetDesc().GetRangeId() == 1 && r.GetLeaderNodeId() != x.metaNode {
				ok = false
				_ = x.cl.TransferLeader(ctx, 1, x.metaNode)
			}
			for i, id := range x.ids {
				if r.GetDesc().GetRangeId() != id || r.GetLeaderNodeId() == x.leader[i] {
					continue
				}
				ok = false
				if !hasVoter(r.GetDesc(), x.leader[i]) {
					x.replaceVoter(ctx, r, x.leader[i]) // the offload moved the replica away
					continue
				}
				_ = x.cl.TransferLeader(ctx, id, x.leader[i])
			}
		}
		return ok
	})
}

// setMode sets hotspot_offload's mode (and the experiment's SLO) on the node running the autopilot.
func (x *experiment) setMode(m policy.HotspotMode) error {
	for _, n := range x.c.Nodes() {
		if n == nil {
			continue
		}
		if p, ok := n.KV.AutopilotPolicy(policy.NameHotspot).(*policy.HotspotOffload); ok {
			p.SetMode(m)
			p.SetSLO(x.slo)
			return nil
		}
	}
	return fmt.Errorf("no node runs the autopilot's hotspot_offload")
}

// arm runs one hot spot of d with the policy in mode: the placement restored, Gap at rest, the hot
// prefix's load ×Factor for d, then Tail; the penalty over the hot spot and its tail, and the
// policy's decisions from the log.
func (x *experiment) arm(ctx context.Context, d time.Duration, mode policy.HotspotMode) (Arm, error) {
	name := map[policy.HotspotMode]string{policy.ModeObserve: "off", policy.ModeAct: "on", policy.ModeAuto: "auto"}[mode]
	a := Arm{Mode: name, DurationS: d.Seconds(), DetectedS: -1}
	// Observing while the placement is restored and the cluster rests: a false alarm in between
	// must not move what place puts back.
	if err := x.setMode(policy.ModeObserve); err != nil {
		return a, err
	}
	// A hot spot past the disk's rate leaves a backlog of reads that drains for a while after it:
	// the next arm starts once it has (its rest would otherwise carry this arm's latency).
	drained := time.Now()
	if err := benchutil.WaitFor(ctx, 3*time.Minute, func() bool { return x.w.backlog() <= restBacklog }); err != nil {
		return a, fmt.Errorf("the previous hot spot's backlog (%d reads) to drain: %w", x.w.backlog(), err)
	}
	a.DrainS = math.Round(10*time.Since(drained).Seconds()) / 10
	if err := x.place(ctx); err != nil {
		return a, fmt.Errorf("restore the placement: %w", err)
	}
	// Every node's utilization is sampled from the rest before the hot spot on: the rest's rows
	// show which nodes stand busy without it.
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan []busyRow, 1)
	go func() { sampled <- x.sampleBusy(sctx) }()
	rest := x.deviceStats()
	if err := stopper.SleepContext(ctx, x.o.Gap); err != nil {
		return a, err
	}
	if err := x.setMode(mode); err != nil {
		return a, err
	}
	before, cacheBefore := x.deviceStats(), x.cacheStats()
	for i, st := range before {
		a.RestReadOps = append(a.RestReadOps, math.Round(float64(st.ReadOps-rest[i].ReadOps)/x.o.Gap.Seconds()))
	}
	start := time.Now()
	x.w.setHot(true)
	err := stopper.SleepContext(ctx, d)
	x.w.setHot(false)
	if err == nil {
		err = stopper.SleepContext(ctx, x.o.Tail)
	}
	stopSampling()
	a.RestBusy, a.NodeBusy = splitBusy(<-sampled, start)
	if err != nil {
		return a, err
	}
	end := time.Now()
	el := end.Sub(start).Seconds()
	for i, st := range x.deviceStats() {
		a.NodeReadOps = append(a.NodeReadOps, math.Round(float64(st.ReadOps-before[i].ReadOps)/el))
		a.NodeWriteOps = append(a.NodeWriteOps, math.Round(float64(st.WriteOps-before[i].WriteOps)/el))
	}
	for i, st := range x.cacheStats() {
		hits, misses := st.BlockCacheHits-cacheBefore[i].BlockCacheHits, st.BlockCacheMisses-cacheBefore[i].BlockCacheMisses
		a.NodeHitRatio = append(a.NodeHitRatio, math.Round(100*float64(hits)/float64(max(1, hits+misses)))/100)
	}
	// The windows span the hot spot and its tail as planned, not as slept: on a loaded host the
	// sleeps and the sampler's stop overrun, and an overrun would add a window to one arm only.
	a.WindowP99Ms, a.Reads, a.Errors = x.w.windows(start, start.Add(d+x.o.Tail))
	for _, p := range a.WindowP99Ms {
		a.PenaltyMs += max(0, p-float64(x.slo.Microseconds())/1000)
	}
	a.P99Ms = x.w.p99Between(start, end)
	if err := x.readDecisions(ctx, &a, start, end.Add(3*time.Second)); err != nil {
		return a, err
	}
	x.o.Progress(fmt.Sprintf("D=%v %s: penalty %.0f ms, p99 %.1f ms, detected at %.1f s, %d operators", d, name,
		a.PenaltyMs, a.P99Ms, a.DetectedS, a.Operators))
	return a, nil
}

// nodeNamed finds the node a hotspot_offload decision is about: the first "nN" of a note's
// operator ("hot spot on nN …") or of an operator's reason ("nN at 95% busy …"; its operator names
// the target).
var nodeNamed = regexp.MustCompile(`\bn(\d+)\b`)

// decisionNode is the node a decision is about (0 if it names none).
func decisionNode(e client.Decision, op bool) uint64 {
	s := e.Operator
	if op {
		s = e.Reason
	}
	m := nodeNamed.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id
}

// restBacklog is the most reads in flight that count as rest: the workload at rest has a few
// (about 150 reads/s of a few ms each).
const restBacklog = 8

// readDecisions fills the arm's detection time, operators and log lines from hotspot_offload's
// decisions between from and to (the episode's closing note comes a few rounds after its end).
// Detection and operators are the hot node's: a decision about another node (a false alarm, or the
// node the offload moved load to) is logged and counted apart.
func (x *experiment) readDecisions(ctx context.Context, a *Arm, from, to time.Time) error {
	if err := stopper.SleepContext(ctx, to.Sub(time.Now())); err != nil {
		return err
	}
	ds, _, err := x.cl.Decisions(ctx)
	if err != nil {
		return err
	}
	for _, e := range ds {
		at, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil || e.Policy != policy.NameHotspot || at.Before(from) || at.After(to) {
			continue
		}
		op := e.Status != policy.StatusAbstained && e.Status != policy.StatusMeasured
		if decisionNode(e, op) != x.hotNode {
			if op {
				a.OtherOperators++
			}
		} else {
			if a.DetectedS < 0 {
				a.DetectedS = at.Sub(from).Seconds()
			}
			if op {
				a.Operators++
			}
		}
		a.Decisions = append(a.Decisions, fmt.Sprintf("+%.1fs %s %s [%s]: %s", at.Sub(from).Seconds(), e.Operator, "", e.Status, e.Reason))
	}
	return nil
}

// busyRow is every node's utilization at one time (n1 first).
type busyRow struct {
	at time.Time
	u  []float64
}

// splitBusy is the mean utilization of each node over the rows before start, and the rows from
// start on.
func splitBusy(rows []busyRow, start time.Time) (rest []float64, from [][]float64) {
	n := 0
	for _, r := range rows {
		if !r.at.Before(start) {
			from = append(from, r.u)
			continue
		}
		if rest == nil {
			rest = make([]float64, len(r.u))
		}
		for i, u := range r.u {
			rest[i] += u
		}
		n++
	}
	for i := range rest {
		rest[i] = math.Round(100*rest[i]/float64(n)) / 100
	}
	return rest, from
}

// sampleBusy reads every node's reported utilization (the busier of CPU and disk, as the policy
// sees it) each second until ctx ends: one row per second, one column per node id.
func (x *experiment) sampleBusy(ctx context.Context) []busyRow {
	var rows []busyRow
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rows
		case <-t.C:
		}
		ns, err := x.cl.Nodes(ctx)
		if err != nil {
			continue
		}
		row := make([]float64, x.o.Nodes)
		for _, n := range ns {
			if id := n.GetDesc().GetNodeId(); id >= 1 && int(id) <= len(row) {
				st := n.GetStats()
				u := st.GetDiskBusy()
				if st.GetCpuCores() > 0 {
					u = max(u, st.GetCpuPercent()/(100*st.GetCpuCores()))
				}
				row[id-1] = math.Round(100*min(u, 1)) / 100
			}
		}
		rows = append(rows, busyRow{at: time.Now(), u: row})
	}
}

// deviceStats is every node's emulated-disk counters, n1 first.
func (x *experiment) deviceStats() []emudisk.Stats {
	out := make([]emudisk.Stats, x.c.Len())
	for i := range out {
		out[i] = x.c.DeviceStats(i)
	}
	return out
}

// cacheStats is every node's engine counters, n1 first (zero for a node that is down).
func (x *experiment) cacheStats() []storage.Stats {
	out := make([]storage.Stats, x.c.Len())
	for i := range out {
		if n := x.c.Node(i); n != nil {
			out[i] = n.Eng.Stats()
		}
	}
	return out
}

// hasVoter reports whether node holds a voter of the range.
func hasVoter(d *pb.RangeDescriptor, node uint64) bool {
	for _, r := range d.GetReplicas() {
		if r.GetNodeId() == node && !r.GetLearner() {
			return true
		}
	}
	return false
}

// replaceVoter gives the range a voter on node in place of one of its followers (one joint change),
// so that its planned leader can lead it again.
func (x *experiment) replaceVoter(ctx context.Context, r *pb.RangeStatus, node uint64) {
	var out uint64
	for _, rep := range r.GetDesc().GetReplicas() {
		if id := rep.GetNodeId(); !rep.GetLearner() && id != r.GetLeaderNodeId() {
			out = id
		}
	}
	if out == 0 {
		return
	}
	_, _ = x.c.Node(0).KV.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: r.GetDesc().GetRangeId(), AddNodeId: node, RemoveNodeId: out})
}

// spread reports whether every node holds a voter of at least all but one of its share of the
// user ranges (3 of every range, over the nodes).
func (x *experiment) spread(ctx context.Context) bool {
	rs, err := x.cl.UserRanges(ctx)
	if err != nil {
		return false
	}
	held := map[uint64]int{}
	for _, r := range rs {
		for _, rep := range r.GetDesc().GetReplicas() {
			if !rep.GetLearner() {
				held[rep.GetNodeId()]++
			}
		}
	}
	share := 3 * len(rs) / x.o.Nodes
	for i := 1; i <= x.o.Nodes; i++ {
		if held[uint64(i)] < share-1 {
			return false
		}
	}
	return true
}
