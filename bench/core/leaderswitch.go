package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/client"
)

// LeaderSwitchReport is what a planned leadership transfer costs the clients of its range: the
// longest gap between two successful writes around each transfer, against the longest gap in a
// window of the same length just before it (the load's own jitter). Unavailability is the switch's
// gap minus the quiet one.
type LeaderSwitchReport struct {
	Transfers        int           `json:"transfers"`
	Threads          int           `json:"threads"`
	Writes           int64         `json:"writes"`
	FailedWrites     int64         `json:"failed_writes"`
	SwitchGapMs      report.Spread `json:"switch_gap_ms"`
	QuietGapMs       report.Spread `json:"quiet_gap_ms"`
	UnavailabilityMs report.Spread `json:"unavailability_ms"`
	TransferMs       report.Spread `json:"transfer_ms"`
	OpsPerSec        float64       `json:"ops_per_sec"`
}

// switchWindow is how long after a transfer starts a gap counts for it, and the length of the quiet
// window before it.
const switchWindow = time.Second

// LeaderSwitch starts three in-process nodes, keeps threads writers on one range, and moves the
// range's leadership to the next voter transfers times, a second and a half apart.
func LeaderSwitch(ctx context.Context, dir string, transfers, threads int) (LeaderSwitchReport, error) {
	rep := LeaderSwitchReport{Transfers: transfers, Threads: threads}
	c, cl, err := startThree(ctx, dir)
	if err != nil {
		return rep, err
	}
	defer c.Stop()
	defer cl.Close()
	// Only this benchmark moves leaderships.
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed} {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			return rep, err
		}
	}
	if err := waitWritable(ctx, cl); err != nil {
		return rep, err
	}
	look, err := cl.Lookup(ctx, []byte("switch/0"))
	if err != nil {
		return rep, err
	}
	rangeID := look.GetRange().GetRangeId()

	var mu sync.Mutex
	var done []int64 // completion times of successful writes, ns since start
	var failed atomic.Int64
	start := time.Now()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range threads {
		wg.Go(func() {
			var mine []int64
			for i := 0; wctx.Err() == nil; i++ {
				if err := cl.Put(wctx, fmt.Appendf(nil, "switch/%d/%d", w, i%1000), []byte("v")); err != nil {
					if wctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				mine = append(mine, int64(time.Since(start)))
			}
			mu.Lock()
			done = append(done, mine...)
			mu.Unlock()
		})
	}
	var starts []int64
	var took []float64
	time.Sleep(2 * time.Second)
	for k := 0; k < transfers && ctx.Err() == nil; k++ {
		from, to, err := nextLeader(c, rangeID)
		if err != nil {
			stop()
			wg.Wait()
			return rep, err
		}
		t0 := time.Now()
		starts = append(starts, int64(t0.Sub(start)))
		if err := cl.TransferLeader(ctx, rangeID, to); err != nil {
			stop()
			wg.Wait()
			return rep, fmt.Errorf("transfer %d from n%d to n%d: %w", k, from, to, err)
		}
		for leads(c, rangeID, from) && time.Since(t0) < 5*time.Second {
			time.Sleep(time.Millisecond)
		}
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
		time.Sleep(1500 * time.Millisecond)
	}
	stop()
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(done)
	var sw, quiet, unavail []float64
	for _, t0 := range starts {
		g := maxGap(done, t0, t0+int64(switchWindow))
		q := maxGap(done, t0-int64(switchWindow)-int64(100*time.Millisecond), t0-int64(100*time.Millisecond))
		sw, quiet, unavail = append(sw, g), append(quiet, q), append(unavail, max(0, g-q))
	}
	rep.Writes, rep.FailedWrites = int64(len(done)), failed.Load()
	rep.SwitchGapMs, rep.QuietGapMs, rep.UnavailabilityMs, rep.TransferMs = report.SpreadOf(sw), report.SpreadOf(quiet), report.SpreadOf(unavail), report.SpreadOf(took)
	rep.OpsPerSec = float64(len(done)) / elapsed.Seconds()
	return rep, nil
}

// startThree starts three in-process nodes in dir and a client of them, and waits until every
// range has three voters.
func startThree(ctx context.Context, dir string) (*benchutil.Cluster, *client.Client, error) {
	return startThreeWith(ctx, dir, benchutil.NodeSpec{Config: benchutil.NodeConfig{HeartbeatInterval: 200 * time.Millisecond}})
}

// startThreeWith starts three nodes of spec and waits for three voters on every range.
func startThreeWith(ctx context.Context, dir string, spec benchutil.NodeSpec) (*benchutil.Cluster, *client.Client, error) {
	c, err := benchutil.StartCluster(ctx, dir, 3, spec)
	if err != nil {
		return nil, nil, err
	}
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		c.Stop()
		return nil, nil, err
	}
	if err := benchutil.WaitFor(ctx, time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, 3) }); err != nil {
		cl.Close()
		c.Stop()
		return nil, nil, fmt.Errorf("waiting for 3 voters on every range: %w", err)
	}
	return c, cl, nil
}

// maxGap is the longest time between consecutive completions in [from, to] (sorted ns), in ms,
// counting the window's edges as completions' neighbours.
func maxGap(done []int64, from, to int64) float64 {
	i, _ := slices.BinarySearch(done, from)
	prev, gap := from, int64(0)
	for ; i < len(done) && done[i] <= to; i++ {
		gap, prev = max(gap, done[i]-prev), done[i]
	}
	gap = max(gap, to-prev)
	return float64(gap) / 1e6
}

// nextLeader is the range's leader now and the voter to move its leadership to.
func nextLeader(c *benchutil.Cluster, rangeID uint64) (from, to uint64, err error) {
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		if r := n.KV.Store().Replica(rangeID); r != nil && r.IsLeader() {
			from = n.KV.NodeID()
			for _, rd := range r.Desc().GetReplicas() {
				if rd.GetNodeId() != from && !rd.GetLearner() {
					return from, rd.GetNodeId(), nil
				}
			}
		}
	}
	return 0, 0, fmt.Errorf("range %d has no leader with another voter", rangeID)
}

func leads(c *benchutil.Cluster, rangeID, node uint64) bool {
	for _, n := range c.Nodes() {
		if n != nil && n.KV.NodeID() == node {
			r := n.KV.Store().Replica(rangeID)
			return r != nil && r.IsLeader()
		}
	}
	return false
}
