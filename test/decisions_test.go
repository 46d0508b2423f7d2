package test

import (
	"context"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
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
