package test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestLinearizableReplicaReadsUnderLeaderKillsAndLearnerChurn runs the porcupine workload with
// every get served by any replica (client.ReplicaRead: voters and a learner, each asking the leader
// for a read index) while a nemesis adds a learner, kills and restarts the leader, and removes the
// learner again, over and over.
func TestLinearizableReplicaReadsUnderLeaderKillsAndLearnerChurn(t *testing.T) {
	runLinearizable(t, 4, "leader kills with a learner added and removed", learnerChurn, client.ReplicaRead())
}

// learnerChurn adds a learner of the workload's range on a node without a replica, kills and
// restarts the range's leader, then removes the learner; it ends with no learner left.
func learnerChurn(e *nemesisEnv) (actions int, err error) {
	ctx := context.Background()
	for _, p := range []string{policy.NameReplicate, policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed} {
		if err := e.admin.SetPolicy(ctx, p, false); err != nil {
			return 0, err
		}
	}
	relocate := func(req *pb.RelocateReplicaRequest) error {
		for i := range e.c.Nodes {
			if !e.c.Alive(i) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			resp, err := e.c.Nodes[i].Node.RelocateReplica(rctx, req)
			cancel()
			if err == nil && resp.GetError() == nil {
				return nil
			}
			e.logf("relocate %v via n%d: %v %v", req, i+1, err, resp.GetError())
		}
		return fmt.Errorf("relocate %v: no node did it", req)
	}
	e.sleep(time.Second)
	for time.Now().Before(e.deadline.Add(-4 * time.Second)) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs, err := testcluster.RangeOf(rctx, e.admin, []byte(e.keys[0]))
		cancel()
		if err != nil || rs.GetLeaderNodeId() == 0 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		d := rs.GetDesc()
		var spare uint64
		for i := range e.c.Nodes {
			if id := uint64(i + 1); !hasReplica(d, id) {
				spare = id
			}
		}
		if spare != 0 {
			if err := relocate(&pb.RelocateReplicaRequest{RangeId: d.RangeId, AddNodeId: spare, Step: pb.RelocateStep_RELOCATE_ADD_LEARNER}); err == nil {
				e.logf("learner of r%d added on n%d", d.RangeId, spare)
				actions++
			}
		}
		e.sleep(time.Second)
		idx := e.c.NodeIndex(rs.GetLeaderNodeId())
		if idx >= 0 && e.c.Alive(idx) {
			e.logf("kill n%d (leader of r%d)", idx+1, d.RangeId)
			if err := e.c.KillWait(idx); err != nil {
				return actions, err
			}
			actions++
			time.Sleep(time.Second + time.Duration(e.rng.IntN(1000))*time.Millisecond)
			if err := e.c.TryRestart(idx); err != nil {
				return actions, err
			}
			e.logf("restarted n%d", idx+1)
		}
		e.sleep(time.Second)
		if spare != 0 {
			if err := relocate(&pb.RelocateReplicaRequest{RangeId: d.RangeId, RemoveNodeId: spare, Step: pb.RelocateStep_RELOCATE_REMOVE}); err == nil {
				e.logf("learner of r%d on n%d removed", d.RangeId, spare)
				actions++
			}
		}
		e.sleep(500 * time.Millisecond)
	}
	return actions, nil
}

// TestBoundedStalenessReadsAreNeverOlderThanTheBound writes an increasing counter through the leader
// while readers on every replica read it with BoundedStaleness(bound). A read that starts at time s
// must see at least the last value acknowledged before s − bound. It also checks that bounded reads
// are mostly served without a round to the leader.
func TestBoundedStalenessReadsAreNeverOlderThanTheBound(t *testing.T) {
	const bound = 300 * time.Millisecond
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	// acked[i] is when value i was acknowledged (ns since start); the writer is the only writer.
	start := time.Now()
	var acked [100000]atomic.Int64
	var last atomic.Int64
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if err := cl.Put(ctx, []byte("bounded/n"), []byte(strconv.FormatInt(i, 10))); err != nil {
				writerDone <- err
				return
			}
			acked[i].Store(int64(time.Since(start)))
			last.Store(i)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	reads, stale := 0, 0
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		s := time.Since(start)
		// The newest value acknowledged before s − bound.
		floor := int64(0)
		for i := last.Load(); i > 0; i-- {
			if at := acked[i].Load(); at != 0 && time.Duration(at) < s-bound {
				floor = i
				break
			}
		}
		v, found, err := cl.Get(ctx, []byte("bounded/n"), client.BoundedStaleness(bound))
		if err != nil {
			t.Fatalf("bounded read: %v", err)
		}
		n, _ := strconv.ParseInt(string(v), 10, 64)
		if !found || n < floor {
			stale++
			t.Errorf("read %d (found %v) at %v; value %d was acknowledged more than %v before", n, found, s, floor, bound)
		}
		reads++
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	var local, rounds uint64
	for _, n := range c.Nodes {
		st := n.Node.Store().LoopStats()
		local += st.BoundedLocalReads
		rounds += st.ReplicaReads
	}
	t.Logf("%d bounded reads, %d too stale; served at once %d, after a read index %d", reads, stale, local, rounds)
	if local == 0 {
		t.Errorf("no bounded read was served without a round to the leader")
	}
}

// TestLearnerServesLinearizableReads adds a learner and reads from it, right after each write, with
// READ_REPLICA: every read sees the write before it, and the learner asked the leader each time.
func TestLearnerServesLinearizableReads(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 4})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)
	testcluster.SwitchOff(t, ctx, cl, policy.NameReplicate)
	key := []byte("learner/k")
	if err := cl.Put(ctx, key, []byte("0")); err != nil {
		t.Fatal(err)
	}
	rs, err := testcluster.RangeOf(ctx, cl, key)
	if err != nil {
		t.Fatal(err)
	}
	var spare uint64
	for i := range c.Nodes {
		if id := uint64(i + 1); !hasReplica(rs.GetDesc(), id) {
			spare = id
		}
	}
	resp, err := c.Nodes[0].Node.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rs.GetDesc().RangeId, AddNodeId: spare, Step: pb.RelocateStep_RELOCATE_ADD_LEARNER})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("add learner on n%d: %v %v", spare, err, resp.GetError())
	}
	learner := c.Nodes[c.NodeIndex(spare)].Node
	before := learner.Store().LoopStats().ReplicaReads
	for i := 1; i <= 50; i++ {
		want := strconv.Itoa(i)
		if err := cl.Put(ctx, key, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := learner.Get(ctx, &pb.GetRequest{Key: key, Header: &pb.RequestHeader{RangeId: rs.GetDesc().RangeId, Consistency: pb.ReadConsistency_READ_REPLICA}})
		if err != nil || got.GetError() != nil {
			t.Fatalf("read %d at the learner: %v %v", i, err, got.GetError())
		}
		if string(got.GetValue()) != want {
			t.Fatalf("read at the learner right after writing %s saw %q", want, got.GetValue())
		}
	}
	if n := learner.Store().LoopStats().ReplicaReads - before; n < 50 {
		t.Fatalf("the learner asked the leader %d times for 50 reads", n)
	}
}

// TestReadReplicasPolicyAddsLearnersWhereTheReadsAre switches read_replicas on in a 5-node cluster
// and reads one range hard at any replica: the policy gives the range learners on the nodes without
// a replica, replicate leaves them, and they serve reads.
func TestReadReplicasPolicyAddsLearnersWhereTheReadsAre(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 5, Node: node.Config{Autopilot: autopilot.Config{
		Interval: 200 * time.Millisecond, Policies: policy.Config{ReadReplicas: policy.ReadReplicasConfig{WarmUp: time.Second, MinReads: 50}}}}})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)
	key := []byte("rr/hot")
	if err := splitAt(ctx, cl, []byte("rr/")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, key, []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetPolicy(ctx, policy.NameReadReplicas, true); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for rctx.Err() == nil {
				_, _, _ = cl.Get(rctx, key, client.ReplicaRead())
			}
		})
	}
	learners := func() []uint64 {
		rs, err := testcluster.RangeOf(ctx, cl, key)
		if err != nil {
			return nil
		}
		var out []uint64
		for _, rd := range rs.GetDesc().GetReplicas() {
			if rd.Learner {
				out = append(out, rd.NodeId)
			}
		}
		return out
	}
	testcluster.WaitFor(t, 60*time.Second, "a read replica of the hot range", func() bool { return len(learners()) > 0 })
	got := learners()
	time.Sleep(3 * time.Second) // replicate runs every round meanwhile
	if now := learners(); len(now) < len(got) {
		t.Fatalf("read replicas %v went away (now %v)", got, now)
	}
	n := c.Nodes[c.NodeIndex(got[0])].Node
	before := n.Store().LoopStats().ReplicaReads
	testcluster.WaitFor(t, 20*time.Second, "the learner serving reads", func() bool { return n.Store().LoopStats().ReplicaReads > before+10 })
	stop()
	wg.Wait()
	t.Logf("read replicas of the hot range on %v", learners())
}
