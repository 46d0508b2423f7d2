package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/test/testcluster"
)

// Kill one node of four: once it has been silent for the dead-node timeout, the autopilot's replicate
// policy re-replicates every range it held on the remaining nodes, and nothing is lost.
func TestDeadNodeReplicasAreReplaced(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 4, Node: node.Config{DeadNodeTimeout: 3 * time.Second}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 0; i < 200; i++ {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("loss/%04d", i)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if _, _, err := cl.Split(ctx, []byte("loss/0100")); err != nil {
		t.Fatalf("split: %v", err)
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	// Kill a node that holds replicas (not node 1, whose address the harness clients start from).
	rs, err := cl.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := uint64(0)
	for _, r := range rs {
		for _, rd := range r.Desc.Replicas {
			if rd.NodeId != 1 {
				victim = rd.NodeId
			}
		}
	}
	t.Logf("killing node %d", victim)
	c.KillWait(int(victim - 1))

	testcluster.WaitFor(t, 60*time.Second, "every range back to 3 live voters without the dead node", func() bool {
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return false
		}
		for _, r := range rs {
			voters := 0
			for _, rd := range r.Desc.Replicas {
				if rd.NodeId == victim || rd.Learner {
					return false
				}
				voters++
			}
			if voters != 3 {
				return false
			}
		}
		return true
	})
	for i := 0; i < 200; i++ {
		v, found, err := cl.Get(ctx, []byte(fmt.Sprintf("loss/%04d", i)))
		if err != nil || !found || string(v) != fmt.Sprint(i) {
			t.Fatalf("after re-replication: get loss/%04d = %q %v %v", i, v, found, err)
		}
	}

	// The node comes back: the replicas it held were replaced, so it drops them, and the ranges stay
	// at three voters.
	if err := c.TryRestart(int(victim - 1)); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "the returning node drops the replicas the cluster replaced", func() bool {
		if !c.FullyReplicated(cl, 3) {
			return false
		}
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return false
		}
		member := map[uint64]bool{}
		for _, r := range rs {
			if hasReplica(r.Desc, victim) {
				member[r.Desc.RangeId] = true
			}
		}
		for _, r := range c.Nodes[victim-1].Node.Store().Replicas() {
			if !member[r.RangeID()] {
				return false
			}
		}
		return true
	})
}
