package test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/admission"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/test/testcluster"
)

// A cluster whose nodes admit only a handful of requests and writes at once: clients that do not
// retry see OVERLOADED (and nothing else goes wrong), clients that retry all get through, the gates
// never hold more than their limits, and every acknowledged write is there afterwards.
func TestAdmissionRefusesBeyondLimitsAndLosesNothing(t *testing.T) {
	const maxRequests, maxWrites = 4, 2
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Node: node.Config{Admission: admission.Config{
		Requests:  admission.Limits{Count: maxRequests},
		Proposals: admission.Limits{Count: maxWrites},
	}}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	// A client without retries fails on a leadership move (NOT_LEADER, or a proposal dropped while
	// raft transfers): only admission may refuse it here (CI saw a rebalance move range 2 mid-test).
	testcluster.Hold(t, ctx, cl)

	var mu sync.Mutex
	acked := map[string]string{}
	hammer := func(cl *client.Client, prefix string, workers, each int) (overloaded, other int) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					k, v := fmt.Sprintf("%s/%02d/%03d", prefix, w, i), fmt.Sprint(i)
					err := cl.Put(ctx, []byte(k), []byte(v))
					mu.Lock()
					switch {
					case err == nil:
						acked[k] = v
					case errors.Is(err, client.ErrOverloaded):
						overloaded++
					default:
						other++
						t.Logf("%s: %v", k, err)
					}
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		return overloaded, other
	}

	// One attempt each: the refusals reach the caller as OVERLOADED.
	once := c.NewClient(5*time.Second, 1)
	overloaded, other := hammer(once, "once", 32, 30)
	t.Logf("without retries: %d acknowledged, %d overloaded, %d other errors", len(acked), overloaded, other)
	if overloaded == 0 {
		t.Errorf("32 writers against %d admitted requests per node: no OVERLOADED", maxRequests)
	}
	if other > 0 {
		t.Errorf("%d errors other than OVERLOADED", other)
	}

	// With the client's retries (backoff on OVERLOADED) every write gets through.
	before := len(acked)
	overloaded, other = hammer(cl, "retry", 16, 20)
	if overloaded+other > 0 || len(acked)-before != 16*20 {
		t.Errorf("retrying client: %d acknowledged of %d, %d overloaded, %d other errors", len(acked)-before, 16*20, overloaded, other)
	}

	var refused uint64
	for i, n := range c.Nodes {
		req, wr := n.Node.Admission()
		t.Logf("node %d: requests %+v; writes %+v", i+1, req, wr)
		refused += req.Refused + wr.Refused
		if req.PeakCount > maxRequests || wr.PeakCount > maxWrites {
			t.Errorf("node %d: peak in flight %d requests, %d writes; limits %d and %d", i+1, req.PeakCount, wr.PeakCount, maxRequests, maxWrites)
		}
		if req.InFlight != 0 {
			t.Errorf("node %d: %d requests still counted in flight after the load", i+1, req.InFlight)
		}
	}
	if refused == 0 {
		t.Errorf("no node counted a refusal")
	}
	for k, v := range acked {
		got, found, err := cl.Get(ctx, []byte(k))
		if err != nil || !found || string(got) != v {
			t.Fatalf("acknowledged %s=%s, read back %q found=%v err=%v", k, v, got, found, err)
		}
	}
}
