package test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestDecisionLogSurvivesAutopilotMove checks that the decision log is kept when the autopilot moves
// with the meta range's leadership: the decisions taken on the first node (adding the joiners'
// replicas) are still listed, with the same ids, by the autopilot on the next node, and new ids
// continue after them.
func TestDecisionLogSurvivesAutopilotMove(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var before []client.Decision
	testcluster.WaitFor(t, 30*time.Second, "finished decisions saved", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil || len(ds) == 0 {
			return false
		}
		for _, d := range ds {
			if d.Status == "running" {
				return false
			}
		}
		before = ds
		return true
	})
	time.Sleep(2 * time.Second) // one more save round after the last finish

	all, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var metaLeader uint64
	for _, r := range all {
		if r.GetDesc().GetRangeId() == replica.MetaRangeID {
			metaLeader = r.GetLeaderNodeId()
		}
	}
	if metaLeader == 0 {
		t.Fatal("meta range has no leader")
	}
	to := metaLeader%3 + 1
	if err := cl.TransferLeader(ctx, replica.MetaRangeID, to); err != nil {
		t.Fatalf("move the meta leadership from n%d to n%d: %v", metaLeader, to, err)
	}
	var after []client.Decision
	testcluster.WaitFor(t, 30*time.Second, "the next autopilot lists the earlier decisions", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		after = ds
		seen := map[uint64]string{}
		for _, d := range ds {
			seen[d.ID] = d.Operator
		}
		for _, d := range before {
			if seen[d.ID] != d.Operator {
				return false
			}
		}
		return true
	})
	t.Logf("%d decisions before the move, %d after", len(before), len(after))
}

// TestDecisionShowsLatencyBeforeAndAfter runs a workload on one range and drains the range's leader:
// the drain policy's transfer of that range must show, in the decision log (the JSON of shoal admin
// decisions and /api/decisions), the requests timed and the p50/p99 latency of the range in the
// window before the transfer and in the window after it, from the leaders' heartbeats.
func TestDecisionShowsLatencyBeforeAndAfter(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3,
		Node: node.Config{Autopilot: autopilot.Config{MeasureAfter: 3 * time.Second}}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// The workload: writes and reads of 100 keys, until the test ends.
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; load.Err() == nil; i++ {
				key := []byte(fmt.Sprintf("lat/%03d", (i*7+w)%100))
				if i%2 == 0 {
					_ = cl.Put(load, key, []byte("v")) // errors while leaderships move are expected
				} else {
					_, _, _ = cl.Get(load, key)
				}
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()

	rangeID, drained, activate := drainLeaderOf(t, ctx, cl, []byte("lat/000"))
	defer activate()
	t.Logf("r%d (led by n%d) serves the workload; n%d drains", rangeID, drained, drained)

	type window struct {
		QPS   float64  `json:"qps"`
		Timed uint64   `json:"timed"`
		P50Ms *float64 `json:"p50_ms"`
		P99Ms *float64 `json:"p99_ms"`
	}
	var found client.Decision
	var tp struct {
		Span   string  `json:"span"`
		Before *window `json:"before"`
		After  *window `json:"after"`
	}
	testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("a decision on r%d with its p99 before and after", rangeID), func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.Range != rangeID || d.Status != "succeeded" || json.Unmarshal(d.Throughput, &tp) != nil {
				continue
			}
			if tp.Before != nil && tp.After != nil && tp.Before.P99Ms != nil && tp.After.P99Ms != nil {
				found = d
				return true
			}
		}
		return false
	})
	for _, w := range []struct {
		name string
		w    *window
	}{{"before", tp.Before}, {"after", tp.After}} {
		p50, p99 := *w.w.P50Ms, *w.w.P99Ms
		if w.w.Timed == 0 || p50 <= 0 || p99 < p50 || p99 > 10_000 {
			t.Errorf("%s: %d requests timed, p50 %.3f ms, p99 %.3f ms: want requests, 0 < p50 ≤ p99 < 10 s", w.name, w.w.Timed, p50, p99)
		}
	}
	t.Logf("%s %q on %s: %.0f ops/s, p50 %.2f ms, p99 %.2f ms (%d timed) before; %.0f ops/s, p50 %.2f ms, p99 %.2f ms (%d timed) after",
		found.Policy, found.Operator, tp.Span, tp.Before.QPS, *tp.Before.P50Ms, *tp.Before.P99Ms, tp.Before.Timed,
		tp.After.QPS, *tp.After.P50Ms, *tp.After.P99Ms, tp.After.Timed)
}

// drainLeaderOf drains the leader of key's range once it has led it under load for a few latency
// windows, moving the leadership off the meta leader first (leaderOffMeta). activate undoes the drain.
func drainLeaderOf(t *testing.T, ctx context.Context, cl *client.Client, key []byte) (rangeID, drained uint64, activate func()) {
	t.Helper()
	rangeID, drained = leaderOffMeta(t, ctx, cl, key)
	time.Sleep(2 * time.Second)
	if err := setNodeState(cl, drained, pb.NodeAdminState_NODE_DRAINING); err != nil {
		t.Fatalf("drain n%d: %v", drained, err)
	}
	return rangeID, drained, func() {
		if err := setNodeState(cl, drained, pb.NodeAdminState_NODE_ACTIVE); err != nil {
			t.Errorf("activate n%d: %v", drained, err)
		}
	}
}

// leaderOffMeta returns the range of key and its leader, which it first moves off the meta range's
// leader if needed: draining the autopilot's own node would move the autopilot while it measures.
func leaderOffMeta(t *testing.T, ctx context.Context, cl *client.Client, key []byte) (rangeID, leader uint64) {
	t.Helper()
	var metaLeader uint64
	testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("leaders of the meta range and of the range of %q", key), func() bool {
		all, err := cl.Ranges(ctx)
		if err != nil {
			return false
		}
		for _, r := range all {
			if r.GetDesc().GetRangeId() == replica.MetaRangeID {
				metaLeader = r.GetLeaderNodeId()
			}
		}
		rs, err := testcluster.RangeOf(ctx, cl, key)
		if err != nil {
			return false
		}
		rangeID, leader = rs.GetDesc().GetRangeId(), rs.GetLeaderNodeId()
		return metaLeader != 0 && leader != 0
	})
	if leader != metaLeader {
		return rangeID, leader
	}
	to := metaLeader%3 + 1
	if err := cl.TransferLeader(ctx, rangeID, to); err != nil {
		t.Fatalf("move r%d's leadership from n%d (the meta leader) to n%d: %v", rangeID, leader, to, err)
	}
	testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("n%d leads r%d", to, rangeID), func() bool {
		rs, err := testcluster.RangeOf(ctx, cl, key)
		return err == nil && rs.GetLeaderNodeId() == to
	})
	return rangeID, to
}
