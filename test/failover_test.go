package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestQuiescedRangeElectsAfterLeaderKill: with production timings (1-s heartbeats, 100-ms ticks,
// election timeout 1-2 s), a range whose leader's node is killed while the range is quiet elects a
// new leader within about an election timeout, not after the nodes' liveness has given up on the
// dead node first. Its followers sleep (quiesced) and hear nothing from the dead node: only the
// silence of the node wakes them.
func TestQuiescedRangeElectsAfterLeaderKill(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{HeartbeatInterval: time.Second,
		Raft: replica.Config{TickInterval: 100 * time.Millisecond}}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, _, err := cl.Split(ctx, []byte("k200")); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	rangeOf := func() uint64 {
		for _, r := range c.Nodes[0].Node.Store().Replicas() {
			if d := r.Desc(); d != nil && string(d.StartKey) == "k200" {
				return r.RangeID()
			}
		}
		return 0
	}
	id := rangeOf()
	victim := c.Nodes[2].Node
	testcluster.WaitFor(t, 30*time.Second, "node 3 leads the range [k200, ∞)", func() bool {
		if r := victim.Store().Replica(id); r != nil && r.IsLeader() {
			return true
		}
		_ = cl.TransferLeader(ctx, id, victim.NodeID())
		return false
	})
	for i := range 20 {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k2%02d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 10*time.Second, "the range's followers quiesce", func() bool {
		for _, i := range []int{0, 1} {
			if r := c.Nodes[i].Node.Store().Replica(id); r == nil || !r.Quiesced() {
				return false
			}
		}
		return true
	})
	killed := time.Now()
	c.Kill(2)
	var took time.Duration
	testcluster.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		for _, i := range []int{0, 1} {
			if r := c.Nodes[i].Node.Store().Replica(id); r != nil && r.IsLeader() {
				took = time.Since(killed)
				return true
			}
		}
		return false
	})
	t.Logf("r%d: new leader %s after its leader's node was killed", id, took.Round(time.Millisecond))
	// Silence seen after 1.5 s, then the rest of a random election timeout (0-1 s) and a vote: 5.2-5.5 s
	// before the wake-up was checked every tick and caught up on the ticks the followers slept through.
	if took > 3*time.Second {
		t.Fatalf("r%d elected a new leader only %s after its leader's node was killed (want within about an election timeout after the node falls silent)", id, took.Round(time.Millisecond))
	}
}
