package test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
	"github.com/shoaldb/shoal/test/testcluster"
)

// streamCluster starts three nodes with placement held still, splits the count job's span at the
// given keys and gives each of its ranges a different leader (round robin over the nodes).
func streamCluster(t *testing.T, splits ...string) (*testcluster.Cluster, *client.Client, context.Context) {
	return streamClusterOf(t, 3, splits...)
}

// streamClusterOf is streamCluster with n nodes: a range whose replicas leave out its leader-to-be
// first gets a replica there (one of its followers moved).
func streamClusterOf(t *testing.T, n int, splits ...string) (*testcluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	return streamClusterWith(t, testcluster.Options{Nodes: n}, splits...)
}

// streamClusterWith is streamClusterOf with the cluster's options.
func streamClusterWith(t *testing.T, opts testcluster.Options, splits ...string) (*testcluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	c := testcluster.StartSafe(t, opts)
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	testcluster.Hold(t, ctx, cl)
	keys := append([]string{stream.CountPrefix}, splits...)
	for _, k := range keys {
		if _, _, err := cl.Split(ctx, []byte(k)); err != nil {
			t.Fatalf("split at %q: %v", k, err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	for i, k := range keys {
		want := c.Nodes[i%len(c.Nodes)].Node.NodeID()
		placeReplica(t, ctx, c, cl, k, want)
		moveLeader(t, ctx, c, cl, k, want)
	}
	return c, cl, ctx
}

// placeReplica makes sure node holds a voter of key's range, moving a follower there if not. A
// new node's join may move a replica of the range at the same time: the move then fails with
// RANGE_MOVED and is planned again from the new descriptor.
func placeReplica(t *testing.T, ctx context.Context, c *testcluster.Cluster, cl *client.Client, key string, node uint64) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		rs, err := testcluster.RangeOf(ctx, cl, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if replicaOnNode(rs.Desc, node) {
			break
		}
		var remove uint64
		for _, r := range rs.Desc.Replicas {
			if r.NodeId != rs.LeaderNodeId {
				remove = r.NodeId
			}
		}
		resp, err := c.Nodes[0].Node.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rs.Desc.RangeId, AddNodeId: node, RemoveNodeId: remove})
		if err == nil && resp.GetError().GetCode() == pb.ErrorCode_RANGE_MOVED && attempt < 5 {
			continue
		}
		if err != nil || resp.GetError() != nil {
			t.Fatalf("move range %d's replica from node %d to node %d: %v %v", rs.Desc.RangeId, remove, node, err, resp.GetError())
		}
		break
	}
	testcluster.WaitFor(t, 30*time.Second, "the moved replica in the range's status", func() bool {
		rs, err := testcluster.RangeOf(ctx, cl, []byte(key))
		if err != nil {
			return false
		}
		for _, r := range rs.Desc.Replicas {
			if r.NodeId == node && !r.Learner {
				return true
			}
		}
		return false
	})
}

// moveLeader transfers the leadership of key's range to node and waits until the range reports it.
func moveLeader(t *testing.T, ctx context.Context, c *testcluster.Cluster, cl *client.Client, key string, node uint64) {
	t.Helper()
	// The leader may not have applied the change that made node a voter yet (the range's status is
	// read from the meta range), and refuses the transfer until it has: ask again.
	testcluster.WaitFor(t, 20*time.Second, "the new leader in the range's status", func() bool {
		rs, err := testcluster.RangeOf(ctx, cl, []byte(key))
		if err != nil {
			return false
		}
		if rs.LeaderNodeId == node {
			return true
		}
		if err := cl.TransferLeader(ctx, rs.Desc.RangeId, node); err != nil {
			t.Logf("transfer range %d to node %d: %v (asking again)", rs.Desc.RangeId, node, err)
		}
		return false
	})
}

func replicaOnNode(d *pb.RangeDescriptor, node uint64) bool {
	for _, r := range d.Replicas {
		if r.NodeId == node {
			return true
		}
	}
	return false
}

func streamStats(c *testcluster.Cluster) (local, remote uint64) {
	for _, n := range c.Nodes {
		st := n.Node.StreamStats()
		local += st.LocalReads + st.LocalWrites
		remote += st.RemoteReads + st.RemoteWrites
	}
	return local, remote
}

// countOf reads the count job's counter of payload p.
func countOf(t *testing.T, ctx context.Context, cl *client.Client, p string) (count int, pos uint64) {
	t.Helper()
	count, pos, err := counted(ctx, cl, p)
	if err != nil {
		t.Fatal(err)
	}
	return count, pos
}

// counted reads the count job's counter of payload p and the position stored with it.
func counted(ctx context.Context, cl *client.Client, p string) (count int, pos uint64, err error) {
	raw, found, err := cl.Get(ctx, []byte(stream.CountPrefix+p))
	if err != nil || !found {
		return 0, 0, fmt.Errorf("counter %q: found %v, %v", p, found, err)
	}
	pos, data, _, err := stream.DecodeValue(raw)
	if err != nil {
		return 0, 0, err
	}
	if count, err = strconv.Atoi(string(data)); err != nil {
		return 0, 0, err
	}
	return count, pos, nil
}

// TestStreamLocalStateAccess: with tasks aligned with ranges, every state access of the count job is
// served by the node that runs the task; placed by a hash of the key, about 1/N are, at 3 and 5 nodes
// (each range led by another node).
func TestStreamLocalStateAccess(t *testing.T) {
	t.Run("3", func(t *testing.T) { localStateAccess(t, 3, "h", "q") })
	t.Run("5", func(t *testing.T) { localStateAccess(t, 5, "f", "k", "p", "u") })
}

func localStateAccess(t *testing.T, n int, splits ...string) {
	for i := range splits {
		splits[i] = stream.CountPrefix + splits[i]
	}
	c, cl, ctx := streamClusterOf(t, n, splits...)
	payloads := func(prefix string) [][]byte {
		var vs [][]byte
		for round := 0; round < 5; round++ {
			for _, a := range "abcdefghijklmnopqrstuvwxyz" {
				for i := 0; i < 6; i++ {
					vs = append(vs, []byte(fmt.Sprintf("%c%s%d", a, prefix, i)))
				}
			}
		}
		return vs
	}
	share := map[stream.Mode]float64{}
	for _, mode := range []stream.Mode{stream.Aligned, stream.Unaligned} {
		in, err := stream.NewIngester(stream.IngesterConfig{Client: cl, Mode: mode}, "count")
		if err != nil {
			t.Fatal(err)
		}
		l0, r0 := streamStats(c)
		acks, err := in.Send(ctx, payloads(mode.String()))
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acks {
			if a.Status != pb.IngestResult_APPLIED {
				t.Fatalf("%s: event %q@%d: %v %s", mode, a.Key, a.Position, a.Status, a.Err)
			}
		}
		l1, r1 := streamStats(c)
		share[mode] = float64(l1-l0) / float64(l1-l0+r1-r0)
		t.Logf("%s: %d local, %d remote state accesses (%.1f %% local)", mode, l1-l0, r1-r0, 100*share[mode])
	}
	if share[stream.Aligned] != 1 {
		t.Errorf("aligned: %.3f of state accesses local, want 1", share[stream.Aligned])
	}
	if s := share[stream.Unaligned]; s < 0.4/float64(n) || s > 1.7/float64(n) {
		t.Errorf("unaligned: %.3f of state accesses local, want about 1/%d", s, n)
	}
	if n, _ := countOf(t, ctx, cl, "kaligned3"); n != 5 {
		t.Errorf("counter kaligned3 = %d after 5 events", n)
	}
}

// counting is a producer of the count job on a fixed set of keys, run until stopped, that checks
// every acknowledgement as it comes and replays acknowledged events every fifth round.
type counting struct {
	keys  int
	mu    sync.Mutex
	acked map[string]uint64 // payload → highest acknowledged position
	dups  int
	lost  int // events answered DUPLICATE on their first acknowledgement
	done  chan struct{}
	errc  chan error
	// cancel ends the round in flight when it outlives finishWithin after the stop.
	cancel context.CancelFunc
}

// finishWithin bounds how long a stopped producer may take to have its round in flight
// acknowledged: on a healthy cluster a round takes well under a second.
const finishWithin = 20 * time.Second

// countIngester is an ingester of the count job, closed at the test's end.
func countIngester(t *testing.T, cl *client.Client) *stream.Ingester {
	t.Helper()
	in, err := stream.NewIngester(stream.IngesterConfig{Client: cl, MaxBatch: 64}, "count")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return in
}

func startCounting(ctx context.Context, in *stream.Ingester, keys int) *counting {
	r := &counting{keys: keys, acked: map[string]uint64{}, done: make(chan struct{}), errc: make(chan error, 1)}
	ctx, r.cancel = context.WithCancel(ctx)
	go func() {
		defer close(r.errc)
		var replays []stream.Event
		for round := 0; ; round++ {
			select {
			case <-r.done:
				return
			default:
			}
			var vs [][]byte
			for k := 0; k < keys; k++ {
				vs = append(vs, []byte(fmt.Sprintf("k%02d", (k*7+round)%keys)))
			}
			evs, err := in.Events(vs)
			if err != nil {
				r.errc <- err
				return
			}
			if round%5 == 4 {
				evs = append(evs, replays...) // sent again after their first acknowledgement
				replays = nil
			}
			acks, err := in.SendEvents(ctx, evs)
			if err == nil {
				replays, err = r.check(evs, acks, replays)
			}
			if err != nil {
				r.errc <- err
				return
			}
		}
	}()
	return r
}

// check records a round's acknowledgements: an APPLIED event saw the count its position says; a
// DUPLICATE either was acknowledged before or was committed by an attempt whose answer was lost.
func (r *counting) check(evs []stream.Event, acks []stream.Ack, replays []stream.Event) ([]stream.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range acks {
		p := string(a.Key[len(stream.CountPrefix):])
		switch {
		case a.Status == pb.IngestResult_APPLIED && string(a.Output) != strconv.FormatUint(a.Position, 10):
			return nil, fmt.Errorf("event %s@%d applied with count %s", p, a.Position, a.Output)
		case a.Status == pb.IngestResult_DUPLICATE && a.Position > r.acked[p]:
			r.lost++ // an attempt whose answer was lost (a killed node) had committed it
		case a.Status == pb.IngestResult_DUPLICATE:
			r.dups++
		case a.Status != pb.IngestResult_APPLIED:
			return nil, fmt.Errorf("event %s@%d: %v %s", p, a.Position, a.Status, a.Err)
		}
		r.acked[p] = max(r.acked[p], a.Position)
		if i%17 == 0 {
			replays = append(replays, evs[i])
		}
	}
	return replays, nil
}

// stop ends the producer and checks the state: each counter equals its key's acknowledged events.
func (r *counting) stop(t *testing.T, ctx context.Context, c *testcluster.Cluster, cl *client.Client) {
	t.Helper()
	total, err := r.verify(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var retries uint64
	for _, n := range c.Nodes {
		if c.Alive(n.Index) {
			retries += n.Node.StreamStats().Retries
		}
	}
	t.Logf("%d events applied exactly once over %d keys, %d replays skipped, %d found applied after a lost answer, %d answers RETRY (re-routed)",
		total, r.keys, r.dups, r.lost, retries)
}

// finish waits for the stopped producer's round in flight, at most finishWithin, and returns its
// error: events not acknowledged by then leave the counters unknown, a failure to report with the
// producer's last error rather than a wait for the test's deadline.
func (r *counting) finish() error {
	defer r.cancel()
	select {
	case err := <-r.errc:
		return err
	case <-time.After(finishWithin):
	}
	r.cancel()
	err := <-r.errc
	if err == nil { // the round ended as the wait did
		return nil
	}
	return fmt.Errorf("the producer's round in flight was not acknowledged within %v of its stop: %w", finishWithin, err)
}

// verify ends the producer and checks the state: each counter equals its key's acknowledged events
// and holds the position of the last (no event lost, none applied twice). It returns the events
// acknowledged.
func (r *counting) verify(ctx context.Context, cl *client.Client) (uint64, error) {
	close(r.done)
	if err := r.finish(); err != nil {
		return 0, err
	}
	// The counters' reads are bounded too: a key that cannot be read is reported, not waited for.
	ctx, cancel := context.WithTimeout(ctx, finishWithin)
	defer cancel()
	var total uint64
	var wrong []string
	for p, n := range r.acked {
		count, pos, err := counted(ctx, cl, p)
		if err != nil {
			return 0, err
		}
		if uint64(count) != n || pos != n {
			wrong = append(wrong, fmt.Sprintf("key %s: counter %d at position %d, want %d acknowledged events", p, count, pos, n))
		}
		total += n
	}
	if len(wrong) > 0 {
		return total, fmt.Errorf("%d keys wrong: %v", len(wrong), wrong)
	}
	if len(r.acked) != r.keys || r.dups == 0 {
		return total, fmt.Errorf("%d keys acknowledged, %d replays answered DUPLICATE", len(r.acked), r.dups)
	}
	return total, nil
}

// TestStreamExactlyOnceThroughMoves: a producer counts events on 60 keys while the span's leadership
// moves twice and its range splits and merges again; replays of acknowledged events are sent too.
// Every acknowledged event's effect must be applied exactly once: each counter equals its key's
// acknowledged events, and each applied event saw the count its position says.
func TestStreamExactlyOnceThroughMoves(t *testing.T) {
	c, cl, ctx := streamCluster(t)
	run := startCounting(ctx, countIngester(t, cl), 60)
	others := func(key string) uint64 { // a node that does not lead key's range
		rs, err := testcluster.RangeOf(ctx, cl, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return c.Nodes[(c.NodeIndex(rs.LeaderNodeId)+1)%len(c.Nodes)].Node.NodeID()
	}
	time.Sleep(2 * time.Second)
	moveLeader(t, ctx, c, cl, stream.CountPrefix, others(stream.CountPrefix))
	time.Sleep(2 * time.Second)
	if _, _, err := cl.Split(ctx, []byte(stream.CountPrefix+"k30")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	moveLeader(t, ctx, c, cl, stream.CountPrefix+"k45", others(stream.CountPrefix+"k45"))
	time.Sleep(2 * time.Second)
	if _, err := cl.Merge(ctx, []byte(stream.CountPrefix)); err != nil { // the split undone
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	run.stop(t, ctx, c, cl)
	if _, remote := streamStats(c); remote != 0 {
		t.Errorf("%d state accesses went to another node; aligned tasks should have none", remote)
	}
	var retries uint64
	for _, n := range c.Nodes {
		retries += n.Node.StreamStats().Retries
	}
	if retries == 0 {
		t.Errorf("no event was re-routed: the moves happened while nothing was in flight?")
	}
}

// TestStreamExactlyOnceThroughNodeKill: the node leading the count span is killed while events are
// in flight to it and comes back 3 s later; the events it held are sent again with their positions to
// the new leader. Every acknowledged event's effect is applied exactly once.
func TestStreamExactlyOnceThroughNodeKill(t *testing.T) {
	c, cl, ctx := streamCluster(t)
	run := startCounting(ctx, countIngester(t, cl), 60)
	time.Sleep(2 * time.Second)
	rs, err := testcluster.RangeOf(ctx, cl, []byte(stream.CountPrefix))
	if err != nil {
		t.Fatal(err)
	}
	victim := c.NodeIndex(rs.LeaderNodeId)
	c.Kill(victim)
	t.Logf("killed node %d, leader of range %d", rs.LeaderNodeId, rs.Desc.RangeId)
	time.Sleep(3 * time.Second)
	if err := c.TryRestart(victim); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	run.stop(t, ctx, c, cl)
}

// TestStreamFollowsANewNode: a fourth node joins while the count job runs; a replica of the span's
// range moves to it and its leadership follows. The new node's task takes the span's events at once
// (every state access local, no event's effect lost or doubled).
func TestStreamFollowsANewNode(t *testing.T) {
	c, cl, ctx := streamCluster(t)
	run := startCounting(ctx, countIngester(t, cl), 60)
	time.Sleep(2 * time.Second)
	i, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	id := c.Nodes[i].Node.NodeID()
	// placeReplica asks the first node, which refuses a node it has not heard of yet.
	testcluster.WaitFor(t, 10*time.Second, "the first node knowing the new one", func() bool {
		resp, err := c.Nodes[0].Node.Nodes(ctx, &pb.NodesRequest{})
		return err == nil && resp.GetError() == nil && slices.ContainsFunc(resp.GetNodes(), func(n *pb.NodeStatus) bool {
			return n.GetDesc().GetNodeId() == id
		})
	})
	placeReplica(t, ctx, c, cl, stream.CountPrefix, id)
	moved := time.Now()
	moveLeader(t, ctx, c, cl, stream.CountPrefix, id)
	testcluster.WaitFor(t, 10*time.Second, "the new node's task applying events", func() bool {
		return c.Nodes[i].Node.StreamStats().Applied > 0
	})
	t.Logf("node %d applied its first events within %s of the leadership transfer's start", id, time.Since(moved).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	run.stop(t, ctx, c, cl)
	st := c.Nodes[i].Node.StreamStats()
	if st.RemoteReads+st.RemoteWrites != 0 || st.LocalShare() != 1 {
		t.Errorf("new node: %+v, want every state access local", st)
	}
	t.Logf("new node: %d events applied, %d local state accesses", st.Applied, st.LocalReads+st.LocalWrites)
}
