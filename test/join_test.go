package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// TestIncrementalJoinUnderLoad: a fourth node joins a loaded three-node cluster with the incremental
// strategy (the default) while clients record a history. The join streams one replica at a time (the
// new node never receives two snapshots at once; a learner that has caught up may await its promotion
// while the next one streams), the node serves ranges while it still lacks others (it is
// "partially-joined"), a restart of the new node in the middle of the join does not stop it, it ends
// holding its share, and porcupine finds the whole history linearizable.
func TestIncrementalJoinUnderLoad(t *testing.T) {
	runLinearizable(t, 3, "an incremental join interrupted by a restart of the new node", joinWithRestart)
}

func joinWithRestart(e *nemesisEnv) (actions int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(e.deadline)+60*time.Second)
	defer cancel()
	// Four user ranges (the workload's keys are in the second), so the new node's share is
	// floor(12/4) = 3 replicas.
	for _, k := range []string{"c", "lin/", "m"} {
		if _, _, err := e.admin.Split(ctx, []byte(k)); err != nil {
			return actions, fmt.Errorf("split at %q: %w", k, err)
		}
		actions++
	}
	waitUntil := func(what string, limit time.Duration, cond func() bool) error {
		end := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(end) {
				return fmt.Errorf("timed out after %v waiting for %s", limit, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	if err := waitUntil("3 voters on every range", 30*time.Second, func() bool { return e.c.FullyReplicated(e.admin, 3) }); err != nil {
		return actions, err
	}
	idx, err := e.c.AddNode()
	if err != nil {
		return actions, err
	}
	actions++
	id := e.c.Nodes[idx].Node.NodeID()
	e.logf("n%d started and joins", id)

	// placement is the new node's part of the range descriptors: the ground truth, where its status
	// (Held, Leading) is its last heartbeat's report and may lag the join record by a heartbeat.
	type placement struct{ voters, learners, leads int }
	status := func() (*pb.NodeStatus, placement) {
		var pl placement
		nodes, err := e.admin.Nodes(ctx)
		if err != nil {
			return nil, pl
		}
		ranges, err := e.admin.UserRanges(ctx)
		if err != nil {
			return nil, pl
		}
		for _, r := range ranges {
			for _, rd := range r.GetDesc().GetReplicas() {
				switch {
				case rd.NodeId != id:
				case rd.Learner:
					pl.learners++
				default:
					pl.voters++
				}
			}
			if r.GetLeaderNodeId() == id {
				pl.leads++
			}
		}
		for _, n := range nodes {
			if n.GetDesc().GetNodeId() == id {
				return n, pl
			}
		}
		return nil, pl
	}
	// logDecisions logs the autopilot's decision log: which step of the join went where, the
	// diagnosis of a join that stalled or ended short.
	logDecisions := func() {
		ds, _, err := e.admin.Decisions(ctx)
		if err != nil {
			e.logf("decision log: %v", err)
			return
		}
		for _, d := range ds {
			e.logf("decision %s %s r%d %s %s: %s", d.Time, d.Policy, d.Range, d.Status, d.Operator, d.Reason)
		}
		if n, pl := status(); n != nil {
			e.logf("n%d now: state %s, join %v; descriptors: %d voters, %d learners, leads %d", id, n.GetState(), n.GetJoin(), pl.voters, pl.learners, pl.leads)
		}
	}
	var maxLearners int
	var sawPartial, restarted bool
	// partialNow: the watcher below has seen the node lead a range while it lacked others; the
	// restart waits for it, so that it interrupts a join that has started serving (a restart before
	// that only delays the join's first leadership, and a fast join may then hand it over together
	// with its last replica).
	var partialNow atomic.Bool
	// recvMax: the most snapshots the new node received at once (its transport's high-water mark,
	// sampled with the node's state; a restart starts a new mark).
	var recvMax atomic.Int64
	// The node's own view, sampled often: does it lead a range while it still lacks some of its share?
	// life serializes the sampling with the restart below (the node's fields change then).
	var life sync.Mutex
	stopWatch := make(chan struct{})
	watched := make(chan bool, 1)
	go func() {
		partial := false
		defer func() { watched <- partial }()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(5 * time.Millisecond):
			}
			life.Lock()
			nd := e.c.Nodes[idx]
			if !e.c.Alive(idx) || nd.Node.Store() == nil {
				life.Unlock()
				continue
			}
			held, leads := 0, 0
			replicas := nd.Node.Store().Replicas()
			recvMax.Store(max(recvMax.Load(), nd.Node.TransportStats().SnapshotsReceivingMax))
			life.Unlock()
			for _, r := range replicas {
				if r.RangeID() == replica.MetaRangeID {
					continue
				}
				// Held: a voter with data. A learner still receiving its snapshot (the next move
				// streams while the previous one hands its leadership over) does not count.
				if d := r.Desc(); d != nil {
					for _, rd := range d.GetReplicas() {
						if rd.NodeId == id && !rd.Learner {
							held++
						}
					}
				}
				if r.IsLeader() {
					leads++
				}
			}
			if leads > 0 && held < 3 {
				partial = true
				partialNow.Store(true)
			}
		}
	}()
	err = waitUntil("the join to complete", 90*time.Second, func() bool {
		n, pl := status()
		maxLearners = max(maxLearners, pl.learners)
		if n == nil || n.GetJoin() == nil {
			return false
		}
		j := n.GetJoin()
		if n.GetState() == "partially-joined" && j.Held < j.Target && j.Leading > 0 {
			sawPartial = true
		}
		if !restarted && partialNow.Load() && j.Held < j.Target && j.DoneUnixNanos == 0 {
			e.logf("restart n%d in the middle of its join (%d/%d replicas)", id, j.Held, j.Target)
			life.Lock()
			if err := e.c.KillWait(idx); err != nil {
				e.logf("kill: %v", err)
			}
			life.Unlock()
			time.Sleep(500 * time.Millisecond)
			life.Lock()
			if err := e.c.TryRestart(idx); err != nil {
				e.logf("restart: %v", err)
			}
			life.Unlock()
			restarted = true
			actions++
		}
		return j.DoneUnixNanos != 0
	})
	close(stopWatch)
	sawPartial = sawPartial || <-watched
	if err != nil {
		logDecisions()
		return actions, err
	}
	n, pl := status()
	j := n.GetJoin()
	e.logf("n%d joined: %d/%d replicas (%d by its last report), leads %d (%d), at most %d snapshots received and %d learners at once, partially joined seen %v, restarted %v",
		id, pl.voters, j.Target, j.Held, pl.leads, j.Leading, recvMax.Load(), maxLearners, sawPartial, restarted)
	switch {
	case pl.voters < int(j.Target):
		logDecisions()
		return actions, fmt.Errorf("n%d holds %d replicas after its join, want its share %d", id, pl.voters, j.Target)
	case recvMax.Load() > 1:
		return actions, fmt.Errorf("the new node received %d snapshots at once during an incremental join, want one at a time", recvMax.Load())
	case maxLearners > 2:
		return actions, fmt.Errorf("the incremental join had %d learners on the new node at once, want at most two (one streaming, one awaiting promotion)", maxLearners)
	case !sawPartial:
		return actions, fmt.Errorf("n%d never served a range while it still lacked others (never partially joined)", id)
	case !restarted:
		return actions, fmt.Errorf("the join finished before n%d could be restarted in its middle", id)
	}
	// Scale-in is symmetric: decommissioning the new node empties it one range at a time.
	if err := e.admin.SetNodeState(ctx, id, pb.NodeAdminState_NODE_DECOMMISSIONING); err != nil {
		return actions, err
	}
	actions++
	// The schedule's invariant: one decommission operator running at a time (the autopilot's own
	// record of its operators; a descriptor may briefly show a stray learner of a failed move).
	maxRunning := 0
	err = waitUntil("the decommission to empty the node", 90*time.Second, func() bool {
		if ds, _, err := e.admin.Decisions(ctx); err == nil {
			running := 0
			for _, d := range ds {
				if d.Policy == "decommission" && d.Status == "running" {
					running++
				}
			}
			maxRunning = max(maxRunning, running)
		}
		ranges, err := e.admin.UserRanges(ctx)
		if err != nil {
			return false
		}
		held := 0
		for _, r := range ranges {
			for _, rd := range r.GetDesc().GetReplicas() {
				if rd.NodeId == id {
					held++
				}
			}
		}
		return held == 0
	})
	if err != nil {
		return actions, err
	}
	e.logf("n%d decommissioned, at most %d decommission operators running at once", id, maxRunning)
	if maxRunning > 1 {
		return actions, fmt.Errorf("the sequential decommission ran %d operators at once, want one", maxRunning)
	}
	return actions, nil
}
