package scenario

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Scenarios of issue 10 (docs/design/incremental-join.md): a fourth node joins a loaded three-node
// cluster, with each join strategy (chapter 2 of the Papaioannou thesis, Figures 2.3–2.6).

// joinLink models each node's network link in the join scenarios: every node sends snapshots at most
// this fast and receives them at most this fast from all senders together. It is slow enough that
// moving the new node's share takes a while on one machine, as streaming tens of GB does on a real
// cluster; and since the receiver's link bounds a parallel join as much as one sender at full speed
// bounds an incremental one, the strategies differ in scheduling, not bandwidth (the chapter's point
// in §2.2: sequential sessions need not take longer if one sender can fill the receiver's link).
const joinLink = 4 << 20

// joinDevice makes the nodes disk-bound (a miss costs a random read on a device with few IOPS), so
// that a fourth node adds capacity even though every node shares the same two CPU cores.
var joinDevice = emudisk.Options{
	NoPageCache:      true,
	ReadBytesPerSec:  64 << 20,
	WriteBytesPerSec: 64 << 20,
	IOPS:             600,
	Latency:          500 * time.Microsecond,
}

func joinVariants() []Variant {
	strategy := func(s string, atEnd bool, sendRate int64) func(*kv.Config) {
		return func(c *kv.Config) {
			c.Autopilot.Policies.Join.Strategy = s
			c.Autopilot.Policies.Join.ServeAtEnd = atEnd
			c.SnapshotRateBytesPerSec = sendRate
			c.SnapshotRecvRateBytesPerSec = joinLink
		}
	}
	return []Variant{
		{Name: "incremental", KV: strategy(policy.JoinIncremental, false, joinLink)},
		{Name: "parallel", KV: strategy(policy.JoinParallel, false, joinLink)},
		// The chapter's controls: parallel with each sender throttled to a third of the link (the
		// same aggregate as one incremental sender), and sequential moves that serve only at the end.
		{Name: "parallel-throttled", KV: strategy(policy.JoinParallel, false, joinLink/3)},
		{Name: "sequential-at-end", KV: strategy(policy.JoinIncremental, true, joinLink)},
	}
}

func init() {
	dev := joinDevice
	base := Scenario{
		Nodes: 3, Records: 160000, Duration: 120 * time.Second, Threads: 16, ValueBytes: 256,
		CacheBytes: 16 << 20, Splits: 12, Policy: policy.NameJoin, Warmup: 10 * time.Second, Device: &dev,
		Pin:      map[string]bool{policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false},
		Variants: joinVariants(),
	}
	b := base
	b.Name, b.ReadFraction = "join", 0.95
	b.Description = "3 nodes, 160k records (~3x the block cache), 12 ranges, YCSB B zipfian; at t=30s a 4th node joins: incremental, parallel, parallel throttled to the incremental rate, sequential serving at the end"
	b.Events = []Event{{At: 30 * time.Second, What: "node joins", Do: JoinSpareNode(), Task: true}}
	Register(b)
	a := b
	a.Name, a.ReadFraction = "join-a", 0.5
	a.Description = "as join, with YCSB A (50/50)"
	Register(a)
}

// JoinSpareNode starts one more node and returns when the autopilot has completed its join (or the
// run ends).
func JoinSpareNode() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		i, err := env.c.addNode(ctx)
		if err != nil {
			return "", fmt.Errorf("start the new node: %w", err)
		}
		id := env.c.nodes[i].kv.NodeID()
		start := time.Now()
		for {
			select {
			case <-ctx.Done():
				return fmt.Sprintf("n%d still joining after %.1fs", id, time.Since(start).Seconds()), nil
			case <-time.After(250 * time.Millisecond):
			}
			nodes, err := env.Client.Nodes(ctx)
			if err != nil {
				continue
			}
			for _, n := range nodes {
				if j := n.GetJoin(); n.GetDesc().GetNodeId() == id && j != nil && j.DoneUnixNanos != 0 {
					desc := fmt.Sprintf("n%d joined (%s): %d replicas, leads %d, in %.1fs", id, j.Strategy, j.Held, j.Leading,
						time.Unix(0, j.DoneUnixNanos).Sub(start).Seconds())
					if j.FirstServedUnixNanos != 0 {
						desc += fmt.Sprintf(", first range served after %.1fs", time.Unix(0, j.FirstServedUnixNanos).Sub(start).Seconds())
					}
					return desc, nil
				}
			}
		}
	}
}

// JoinReport is the chapter's evaluation of one join: the worst dip of throughput against the
// pre-join mean over 5-second windows, when the new node first served a range, how long the join
// took, and two SLO-violation scores over 1-second windows: the count of windows whose p99 exceeds
// the threshold (SLOFactor × the steady-state p99), and the sum of the excess in ms.
type JoinReport struct {
	PreJoinThroughput float64 `json:"pre_join_throughput"`
	WorstDip          float64 `json:"worst_dip"` // e.g. -0.13: the worst 5 s window was 13 % below the pre-join mean
	FirstServedS      float64 `json:"first_served_s"`
	JoinS             float64 `json:"join_s"`
	SLOThresholdMs    float64 `json:"slo_threshold_ms"`
	SLOFactor         float64 `json:"slo_factor"`
	ViolatingWindows  int     `json:"violating_windows"`
	ExcessMs          float64 `json:"excess_ms"`
	PostJoinRatio     float64 `json:"post_join_ratio"` // throughput after the join / before
}

const (
	dipWindow = 5
	sloFactor = 1.5
)

// joinReport measures the first Task event as a join of node index nodes (the first spare).
func joinReport(rr *RunReport, perSec []*hdrhistogram.Snapshot, warmup time.Duration, nodes int) *JoinReport {
	var ev *EventMark
	for i := range rr.Events {
		if rr.Events[i].Task && rr.Events[i].Label == "node joins" {
			ev = &rr.Events[i]
			break
		}
	}
	if ev == nil {
		return nil
	}
	jr := &JoinReport{JoinS: ev.EndT - ev.T, SLOFactor: sloFactor, FirstServedS: -1}
	pre, preP99, preN := window(rr.Series, perSec, warmup.Seconds(), ev.T)
	if preN == 0 {
		return nil
	}
	jr.PreJoinThroughput = pre
	jr.SLOThresholdMs = sloFactor * preP99
	var during []Point
	var postOps int64
	postN := 0
	for _, p := range rr.Series {
		mid := p.T - 0.5
		switch {
		case mid >= ev.T && mid <= ev.EndT:
			during = append(during, p)
			if jr.FirstServedS < 0 && len(p.Leaders) > nodes && p.Leaders[nodes] > 0 {
				jr.FirstServedS = p.T - ev.T
			}
			if p.P99Ms > jr.SLOThresholdMs {
				jr.ViolatingWindows++
				jr.ExcessMs += p.P99Ms - jr.SLOThresholdMs
			}
		case mid > ev.EndT:
			postOps += p.Ops
			postN++
		}
	}
	jr.WorstDip = math.Inf(1)
	for i := 0; i+dipWindow <= len(during); i++ {
		var ops int64
		for _, p := range during[i : i+dipWindow] {
			ops += p.Ops
		}
		jr.WorstDip = math.Min(jr.WorstDip, float64(ops)/dipWindow/jr.PreJoinThroughput-1)
	}
	if math.IsInf(jr.WorstDip, 1) { // a join shorter than one window
		var ops int64
		for _, p := range during {
			ops += p.Ops
		}
		jr.WorstDip = 0
		if len(during) > 0 {
			jr.WorstDip = float64(ops)/float64(len(during))/jr.PreJoinThroughput - 1
		}
	}
	if postN > 0 {
		jr.PostJoinRatio = float64(postOps) / float64(postN) / jr.PreJoinThroughput
	}
	return jr
}
