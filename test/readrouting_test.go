package test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// slowLink delays and counts a client's Get calls per node address: a node made slow as the client
// sees it.
type slowLink struct {
	mu     sync.Mutex
	slow   string // address whose calls wait delay
	delay  time.Duration
	counts map[string]int
}

func (s *slowLink) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if strings.HasSuffix(method, "/Get") {
		s.mu.Lock()
		s.counts[cc.Target()]++
		slow := s.slow != "" && cc.Target() == s.slow
		s.mu.Unlock()
		if slow {
			select {
			case <-time.After(s.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts since the last take and sets the slowed address.
func (s *slowLink) take(slow string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.counts
	s.counts, s.slow = make(map[string]int), slow
	return out
}

// TestReplicaReadsSpreadByLoad reads one hot range, with three voters and two learners, from eight
// goroutines at any replica: every replica serves reads, most going where they finish first (the
// leader, which needs no read index from another node); once that node answers late (60 ms, or four
// times the mean read's cost on a slower host), the client sends it only the odd probe and the other
// four share the reads.
func TestReplicaReadsSpreadByLoad(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 5})
	admin := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	testcluster.Hold(t, ctx, admin)
	testcluster.SwitchOff(t, ctx, admin, policy.NameReplicate)
	key := []byte("route/hot")
	if err := splitAt(ctx, admin, []byte("route/")); err != nil {
		t.Fatal(err)
	}
	if err := admin.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	rs, err := testcluster.RangeOf(ctx, admin, key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		id := uint64(i + 1)
		if hasReplica(rs.GetDesc(), id) {
			continue
		}
		resp, err := c.Nodes[0].Node.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rs.GetDesc().RangeId, AddNodeId: id, Step: pb.RelocateStep_RELOCATE_ADD_LEARNER})
		if err != nil || resp.GetError() != nil {
			t.Fatalf("add learner on n%d: %v %v", id, err, resp.GetError())
		}
	}
	link := &slowLink{delay: 60 * time.Millisecond, counts: make(map[string]int)}
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs(), RequestTimeout: 3 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithChainUnaryInterceptor(link.intercept)}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	read := func(d time.Duration) {
		rctx, stop := context.WithTimeout(ctx, d)
		defer stop()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 8 {
			wg.Go(func() {
				for rctx.Err() == nil {
					if _, _, err := cl.Get(rctx, key, client.ReplicaRead()); err != nil && rctx.Err() == nil {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("%d replica reads failed", n)
		}
	}
	share := func(counts map[string]int, addr string) float64 {
		total := 0
		for _, n := range counts {
			total += n
		}
		return float64(counts[addr]) / float64(max(total, 1))
	}

	read(time.Second) // the client learns the five replicas and their latencies
	link.take("")
	read(3 * time.Second)
	even := link.take("")
	t.Logf("reads per node, none slowed: %v", even)
	favourite := ""
	for _, n := range c.Nodes {
		if even[n.Addr] == 0 {
			t.Fatalf("node %s, a replica, served no read: %v", n.Addr, even)
		}
		if favourite == "" || even[n.Addr] > even[favourite] {
			favourite = n.Addr
		}
	}

	// The delay must dwarf what a read costs on this machine now: under a loaded host a follower's
	// read index can take longer than a fixed delay on the leader, and the test would then measure the
	// host, not the routing. Eight closed-loop readers over three seconds give the mean cost.
	total := 0
	for _, n := range even {
		total += n
	}
	mean := 8 * 3 * time.Second / time.Duration(max(total, 1))
	link.delay = max(60*time.Millisecond, 4*mean)
	link.take(favourite)
	read(4 * time.Second)
	slowed := link.take("")
	t.Logf("reads per node, %s slowed by %v: %v", favourite, link.delay, slowed)
	// Below two thirds of its fair share (a loaded machine slows every node, which shrinks the
	// delay's weight, and the client keeps probing the slowed one to learn when it recovers), and
	// less than any other node.
	if s := share(slowed, favourite); s > (2.0/3)/float64(len(c.Nodes)) {
		t.Fatalf("the slowed node %s still served %.1f%% of the reads: %v", favourite, 100*s, slowed)
	}
	for _, n := range c.Nodes {
		if s := share(slowed, n.Addr); n.Addr != favourite && (s < 0.1 || slowed[n.Addr] <= slowed[favourite]) {
			t.Fatalf("node %s served %.1f%% of the reads while %s was slowed: %v", n.Addr, 100*s, favourite, slowed)
		}
	}
}
