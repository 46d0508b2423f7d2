package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// runningHeavy reports whether n runs a heavy task now.
func runningHeavy(n *node.Node) bool {
	for _, t := range n.Background().Status().Tasks {
		if t.Heavy && t.State == bgtask.Running {
			return true
		}
	}
	return false
}

// TestConcurrentTasksNeverTakeAMajority: two nodes that hold voters of the same ranges announce
// maintenance at the same moment. One starts; the other waits until the first has ended, so no range
// ever has two of its three voters busy at once.
func TestConcurrentTasksNeverTakeAMajority(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stop := make(chan struct{})
	overlap := make(chan time.Time, 1)
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if runningHeavy(c.Nodes[1].Node) && runningHeavy(c.Nodes[2].Node) {
				select {
				case overlap <- time.Now():
				default:
				}
			}
		}
	})
	const d = 3 * time.Second
	type result struct {
		node    int
		started time.Time
		outcome string
		err     error
	}
	results := make(chan result, 2)
	stubs := rawStubs(t, c)
	begin := time.Now()
	for _, i := range []int{1, 2} {
		go func() {
			resp, err := stubs[i].Maintenance(ctx, &pb.MaintenanceRequest{Task: "scrub", DurationMs: d.Milliseconds()})
			if err == nil && resp.GetError() != nil {
				err = &client.Error{Code: resp.GetError().GetCode(), Message: resp.GetError().GetMessage()}
			}
			results <- result{node: i, started: time.Now(), outcome: resp.GetOutcome(), err: err}
		}()
	}
	a, b := <-results, <-results
	close(stop)
	watch.Wait()
	for _, r := range []result{a, b} {
		if r.err != nil {
			t.Fatalf("maintenance on node %d: %v", r.node+1, r.err)
		}
		t.Logf("node %d: may start after %v: %s", r.node+1, r.started.Sub(begin).Round(time.Millisecond), r.outcome)
	}
	select {
	case at := <-overlap:
		t.Fatalf("both nodes ran a heavy task at %v after the requests", at.Sub(begin))
	default:
	}
	if first, second := a, b; second.started.Before(first.started.Add(d - 500*time.Millisecond)) {
		t.Fatalf("the second task started %v after the first, whose announcement lasts %v", second.started.Sub(first.started), d)
	}
}
