package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// threeRanges starts 3 nodes and splits the key space at k100 and k200, 3 voters on every range; the
// context ends with the test, after 2 minutes at most.
func threeRanges(t *testing.T) (*testcluster.Cluster, *client.Client, context.Context) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	for _, at := range []string{"k100", "k200"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	return c, cl, ctx
}

// TestPreStopHandsOverLeadershipsWithoutFailedRequests: the orchestrator's prestop announcement on
// the node that leads every range moves all its leaderships to peers while writers keep writing;
// no write fails, the node reports that it is stopping (readiness), and the autopilot gives it no
// leadership back. Killing it afterwards costs the ranges no election: the writes go on.
func TestPreStopHandsOverLeadershipsWithoutFailedRequests(t *testing.T) {
	c, cl, ctx := threeRanges(t)
	target := c.Nodes[0].Node
	testcluster.WaitFor(t, 60*time.Second, "node 1 leads every range", func() bool {
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return false
		}
		all := true
		for _, r := range rs {
			if r.LeaderNodeId != target.NodeID() {
				all = false
				_ = cl.TransferLeader(ctx, r.Desc.RangeId, target.NodeID())
			}
		}
		return all
	})

	var writes, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("k%03d", (w*97+i)%300)
				if err := cl.Put(ctx, []byte(k), []byte(fmt.Sprint(i))); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				writes.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	resp, err := rawStubs(t, c)[0].Maintenance(ctx, &pb.MaintenanceRequest{Task: background.PreStopTask, DurationMs: 20_000})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("prestop: %v %v", err, resp.GetError())
	}
	t.Logf("prestop: %s", resp.GetOutcome())
	if !strings.Contains(resp.GetOutcome(), "every leadership moved") || leaderCount(target) != 0 || !target.Stopping() {
		t.Fatalf("after prestop: %q, node 1 leads %d, stopping=%v", resp.GetOutcome(), leaderCount(target), target.Stopping())
	}
	time.Sleep(2 * time.Second) // the autopilot's rounds: none gives node 1 a leadership back
	if n := leaderCount(target); n != 0 {
		t.Fatalf("node 1 leads %d ranges again while stopping", n)
	}
	c.Kill(0)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d writes, %d failed", writes.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d writes failed across prestop and the kill; first: %v", failed.Load(), writes.Load(), firstErr.Load())
	}
}

// TestPostStartWaitsForCatchUp: a node restarted after missing writes answers poststart only once
// each of its replicas has applied what its range's leader had applied before the restart, reports
// itself taking no leadership until then, and takes leaderships again afterwards.
func TestPostStartWaitsForCatchUp(t *testing.T) {
	c, cl, ctx := threeRanges(t)
	c.Kill(2)
	for i := range 900 {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%03d", i%300)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	want := map[uint64]uint64{} // range → its leader's applied index before node 3 is back
	for _, i := range []int{0, 1} {
		for _, r := range c.Nodes[i].Node.Store().Replicas() {
			if r.IsLeader() {
				want[r.RangeID()] = r.Applied()
			}
		}
	}
	c.Restart(2)
	n3 := c.Nodes[2].Node
	resp, err := rawStubs(t, c)[2].Maintenance(ctx, &pb.MaintenanceRequest{Task: background.PostStartTask, DurationMs: 20_000})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("poststart: %v %v", err, resp.GetError())
	}
	t.Logf("poststart: %s", resp.GetOutcome())
	if !strings.HasPrefix(resp.GetOutcome(), "replicas caught up") || n3.CatchingUp() {
		t.Fatalf("poststart = %q, catching up = %v", resp.GetOutcome(), n3.CatchingUp())
	}
	for id, a := range want {
		r := n3.Store().Replica(id)
		if r == nil {
			t.Fatalf("node 3 has no replica of r%d", id)
		}
		if got := r.Applied(); got < a {
			t.Fatalf("r%d on node 3 applied %d when poststart answered, its leader %d before the restart", id, got, a)
		}
	}
	testcluster.WaitFor(t, 10*time.Second, "node 3 takes leaderships again", func() bool {
		nodes, err := cl.Nodes(ctx)
		if err != nil {
			return false
		}
		for _, ns := range nodes {
			if ns.GetDesc().GetNodeId() == n3.NodeID() {
				return ns.GetLive() && !ns.GetDraining()
			}
		}
		return false
	})
}
