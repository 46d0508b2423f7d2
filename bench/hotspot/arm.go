package hotspot

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
)

// experiment is one cluster's run.
type experiment struct {
	o       Options
	c       *benchutil.Cluster
	cl      *client.Client
	w       *workload
	hot     []int            // the hot prefix's ranges (indexes)
	hotNode uint64           // the node leading them
	ids     map[int]uint64   // range index → range id
	voters  map[int][]uint64 // range index → its voters
	leader  map[int]uint64   // the leader each range is placed on before a hot spot
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
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed, policy.NameUsageBalance} {
		if err := x.cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for r := 0; r < o.Ranges; r++ {
		if _, _, err := x.cl.Split(ctx, rangeStart(r)); err != nil {
			return fmt.Errorf("split at %q: %w", rangeStart(r), err)
		}
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
		Values: func(w int) func() []byte { return randomValues(o, w) }}).Run(ctx, x.cl); err != nil {
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
		if x.hotNode == 0 || k > held[x.hotNode] || k == held[x.hotNode] && n < x.hotNode {
			x.hotNode = n
		}
	}
	leads := map[uint64]int{}
	for i := 0; i < x.o.Ranges; i++ {
		if len(x.hot) < x.o.HotRanges && slices.Contains(x.voters[i], x.hotNode) {
			x.hot = append(x.hot, i)
			x.leader[i] = x.hotNode
			continue
		}
		var best uint64
		for _, v := range x.voters[i] {
			if v != x.hotNode && (best == 0 || leads[v] < leads[best]) {
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
	return benchutil.WaitFor(ctx, time.Minute, func() bool {
		rs, err := x.cl.UserRanges(ctx)
		if err != nil {
			return false
		}
		ok := true
		for _, r := range rs {
			for i, id := range x.ids {
				if r.GetDesc().GetRangeId() == id && r.GetLeaderNodeId() != x.leader[i] {
					ok = false
					_ = x.cl.TransferLeader(ctx, id, x.leader[i])
				}
			}
		}
		return ok
	})
}

// setMode sets hotspot_offload's mode on the node running the autopilot.
func (x *experiment) setMode(m policy.HotspotMode) error {
	for _, n := range x.c.Nodes() {
		if n == nil {
			continue
		}
		if p, ok := n.KV.AutopilotPolicy(policy.NameHotspot).(*policy.HotspotOffload); ok {
			p.SetMode(m)
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
	if err := x.setMode(mode); err != nil {
		return a, err
	}
	if err := x.place(ctx); err != nil {
		return a, fmt.Errorf("restore the placement: %w", err)
	}
	if err := sleep(ctx, x.o.Gap); err != nil {
		return a, err
	}
	start := time.Now()
	x.w.setHot(true)
	if err := sleep(ctx, d); err != nil {
		return a, err
	}
	x.w.setHot(false)
	if err := sleep(ctx, x.o.Tail); err != nil {
		return a, err
	}
	end := time.Now()
	a.WindowP99Ms, a.Reads, a.Errors = x.w.windows(start, end)
	for _, p := range a.WindowP99Ms {
		a.PenaltyMs += max(0, p-float64(x.o.SLO.Microseconds())/1000)
	}
	a.P99Ms = x.w.p99Between(start, end)
	if err := x.readDecisions(ctx, &a, start, end.Add(3*time.Second)); err != nil {
		return a, err
	}
	x.o.Progress(fmt.Sprintf("D=%v %s: penalty %.0f ms, p99 %.1f ms, detected at %.1f s, %d operators", d, name,
		a.PenaltyMs, a.P99Ms, a.DetectedS, a.Operators))
	return a, nil
}

// readDecisions fills the arm's detection time, operators and log lines from hotspot_offload's
// decisions between from and to (the episode's closing note comes a few rounds after its end).
func (x *experiment) readDecisions(ctx context.Context, a *Arm, from, to time.Time) error {
	if err := sleep(ctx, to.Sub(time.Now())); err != nil {
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
		if a.DetectedS < 0 {
			a.DetectedS = at.Sub(from).Seconds()
		}
		if e.Status != policy.StatusAbstained && e.Status != policy.StatusMeasured {
			a.Operators++
		}
		a.Decisions = append(a.Decisions, fmt.Sprintf("+%.1fs %s %s [%s]: %s", at.Sub(from).Seconds(), e.Operator, "", e.Status, e.Reason))
	}
	return nil
}
