package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestPreStopHandsOverLeadershipsWithoutFailedRequests: the orchestrator's prestop announcement on
// the node that leads every range moves all its leaderships to peers while writers keep writing;
// no write fails, the node reports that it is stopping (readiness), and the autopilot gives it no
// leadership back. Killing it afterwards costs the ranges no election: the writes go on.
func TestPreStopHandsOverLeadershipsWithoutFailedRequests(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, at := range []string{"k100", "k200"} {
		if _, _, err := cl.Split(ctx, []byte(at)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
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
