package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/queueing"
	"github.com/shoaldb/shoal/sim/workload"
)

// testCluster: nodes nodes, ranges ranges of 1000 records of 1 KiB each (1000 KiB), uniform load.
func testCluster(t *testing.T, nodes, ranges int, ops float64) *Cluster {
	t.Helper()
	records := int64(ranges) * 1000
	return newCluster(DefaultParams(), des.New(epoch), 1, clusterSpec{nodes: nodes, ranges: ranges, rf: 3, records: records,
		valueBytes: 1024, dist: workload.Uniform{N: records}, rate: workload.Constant(ops), readFrac: 0.9})
}

func TestSnapshotsShareUnchangedRanges(t *testing.T) {
	c := testCluster(t, 3, 10, 0)
	a, b := c.Snapshot(), c.Snapshot()
	for i := range a.Ranges {
		if a.Ranges[i] != b.Ranges[i] {
			t.Fatalf("r%d rebuilt though nothing changed", a.Ranges[i].ID)
		}
	}
	r := c.order[2]
	to := r.reps[1].Node
	if err := c.TransferLeader(context.Background(), r.id, to); err != nil {
		t.Fatal(err)
	}
	c.loop.RunUntil(epoch.Add(time.Second))
	d := c.Snapshot()
	for i, mr := range d.Ranges {
		if changed := mr != b.Ranges[i]; changed != (mr.ID == r.id) {
			t.Fatalf("r%d: rebuilt %v, want only r%d rebuilt", mr.ID, changed, r.id)
		}
	}
	if d.Range(r.id).Leader != to || d.Node(to).Leaders != 1+b.Node(to).Leaders {
		t.Fatalf("transfer not in the snapshot: %+v", d.Range(r.id))
	}
}

// TestStepsLand: each Actuator call is checked at once and lands after its mechanism's delay.
func TestStepsLand(t *testing.T) {
	p := DefaultParams()
	stream := seconds(1000 * 1024 / p.snapshotRate())
	snapshot := stream + p.snapshotTime(1000*1024)
	ctx := context.Background()
	tests := []struct {
		name    string
		call    func(c *Cluster) error
		wantErr bool
		landed  func(c *Cluster) bool
		after   time.Duration // lands no earlier than this
	}{
		{"add learner: stream plus apply", func(c *Cluster) error { return c.AddLearner(ctx, 2, 4) }, false,
			func(c *Cluster) bool { return c.ranges[2].hasReplica(4) && !c.ranges[2].isVoter(4) }, snapshot},
		{"two snapshots from one leader stream one after the other", func(c *Cluster) error {
			if err := c.AddLearner(ctx, 2, 4); err != nil {
				return err
			}
			return c.AddLearner(ctx, 6, 4) // r6 is also led by n1 (user range i is led by node i mod 4 + 1)
		}, false, func(c *Cluster) bool { return c.ranges[6].hasReplica(4) }, stream + snapshot},
		{"add learner on a dead node fails", func(c *Cluster) error { c.kill(4); return c.AddLearner(ctx, 2, 4) }, true, nil, 0},
		{"promote and remove in one change", func(c *Cluster) error {
			c.ranges[2].reps = append(c.ranges[2].reps, c.ranges[2].reps[0])
			c.ranges[2].reps[3].Node, c.ranges[2].reps[3].Learner = 4, true
			return c.PromoteVoter(ctx, 2, 4, 3)
		}, false, func(c *Cluster) bool { return c.ranges[2].isVoter(4) && !c.ranges[2].hasReplica(3) }, p.ConfChange},
		{"transfer to a voter", func(c *Cluster) error { return c.TransferLeader(ctx, 2, 2) }, false,
			func(c *Cluster) bool { return c.ranges[2].leader == 2 }, p.Transfer},
		{"transfer to a non-voter fails", func(c *Cluster) error { return c.TransferLeader(ctx, 2, 4) }, true, nil, 0},
		{"split inside", func(c *Cluster) error { return c.Split(ctx, 2, workload.Key(400)) }, false,
			func(c *Cluster) bool { return c.ranges[2].hi == 400 && len(c.order) == 7 }, p.Split},
		{"split at the start fails", func(c *Cluster) error { return c.Split(ctx, 2, workload.Key(0)) }, true, nil, 0},
		{"merge across different replicas fails", func(c *Cluster) error { return c.Merge(ctx, 2) }, true, nil, 0},
		{"merge", func(c *Cluster) error {
			c.ranges[3].reps = append(c.ranges[3].reps[:0], c.ranges[2].reps...)
			return c.Merge(ctx, 2)
		},
			false, func(c *Cluster) bool { return c.ranges[2].hi == 2000 && c.ranges[3] == nil && len(c.order) == 5 }, p.Merge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 4, 6, 0)
			err := tt.call(c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			c.loop.RunUntil(epoch.Add(tt.after - time.Millisecond))
			if tt.landed(c) {
				t.Fatalf("landed before %v", tt.after)
			}
			c.loop.RunUntil(epoch.Add(tt.after + time.Millisecond))
			if !tt.landed(c) {
				t.Fatalf("not landed %v after the call", tt.after)
			}
			var share float64
			for _, r := range c.order {
				share += r.share
			}
			if math.Abs(share-1) > 1e-9 {
				t.Fatalf("the ranges' shares sum to %v", share)
			}
		})
	}
}

// TestElections: a dead leader's range elects a live voter within the election timeout; a range
// without a live quorum elects nobody until a voter comes back.
func TestElections(t *testing.T) {
	p := DefaultParams()
	c := testCluster(t, 3, 3, 0)
	r := c.order[0]
	c.kill(r.leader)
	c.loop.RunUntil(epoch.Add(p.ElectionMin - time.Millisecond))
	if r.leader != 0 {
		t.Fatal("a leader before the election timeout")
	}
	c.loop.RunUntil(epoch.Add(p.ElectionMax))
	if r.leader == 0 || c.reachable(r.leader) != nil {
		t.Fatalf("no live leader after %v: n%d", p.ElectionMax, r.leader)
	}
	c.kill(r.leader)
	c.loop.RunUntil(epoch.Add(time.Minute))
	if r.leader != 0 {
		t.Fatalf("n%d leads with one voter of three up", r.leader)
	}
	c.restart(1)
	c.loop.RunUntil(epoch.Add(time.Minute + p.ElectionMax))
	if r.leader == 0 {
		t.Fatal("no leader after a voter came back")
	}
}

// TestHeartbeatServesWhatNodesCan: load within capacity is served at M/M/1's latency; an overloaded
// leader serves MaxUtilization of its capacity and refuses the rest; a leaderless range's load is
// refused.
func TestHeartbeatServesWhatNodesCan(t *testing.T) {
	p := DefaultParams()
	c := testCluster(t, 3, 3, 3000) // one range per node, 1000 ops/s each: well within capacity
	s := c.heartbeat(nil)
	if math.Abs(s.ops-3000) > 1e-6 || s.errors > 1e-6 {
		t.Fatalf("served %.1f, refused %.1f of 3000 ops/s", s.ops, s.errors)
	}
	// Each node leads one range: 900 reads + 100 writes at WriteCost, and follows two ranges' writes.
	offered := 900 + 100*p.WriteCost + 200*p.FollowerWriteCost
	srv := queueing.Server{Mu: p.mu()}
	perRequest := offered / 1000 / p.mu()
	want := time.Duration(float64(time.Second) * -math.Log(0.01) * perRequest / (1 - srv.Utilization(offered)))
	if d := s.p99 - want; d > time.Microsecond || d < -time.Microsecond {
		t.Fatalf("p99 %v, want %v", s.p99, want)
	}

	c = testCluster(t, 3, 3, 3*p.mu())
	s = c.heartbeat(nil)
	if s.errors <= 0 || s.ops > 3*queueing.MaxUtilization*p.mu() {
		t.Fatalf("overload: served %.0f, refused %.0f", s.ops, s.errors)
	}
	c = testCluster(t, 3, 3, 3000)
	c.kill(c.order[0].leader)
	s = c.heartbeat(nil)
	if math.Abs(s.errors-1000) > 1e-6 {
		t.Fatalf("a leaderless range's 1000 ops/s: refused %.1f", s.errors)
	}
}

// TestSnapshotSlots: a node takes part in at most the executor's limit of snapshots at once; a slot
// frees when its snapshot has landed.
func TestSnapshotSlots(t *testing.T) {
	ctx := context.Background()
	c := testCluster(t, 5, 10, 0)
	c.maxSnaps = 2
	// r2, r7 and r12... are led by n1 (user range i by node i mod 5 + 1); n5 holds none of r2, r7.
	for _, id := range []uint64{2, 7} {
		if err := c.AddLearner(ctx, id, 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddLearner(ctx, 3, 5); err == nil {
		t.Fatal("a third snapshot to n5 was accepted")
	}
	c.loop.RunUntil(epoch.Add(time.Minute))
	if !c.ranges[2].hasReplica(5) || !c.ranges[7].hasReplica(5) {
		t.Fatal("the two accepted snapshots did not land")
	}
	if err := c.AddLearner(ctx, 3, 5); err != nil {
		t.Fatalf("no slot after the snapshots landed: %v", err)
	}
}

// TestLeaderlessPartOfASecond: a second's throughput counts the part of it a range was leaderless,
// not the state at the heartbeat: a leader killed half-way through a second costs half that
// second's requests of its range, and the whole of the next.
func TestLeaderlessPartOfASecond(t *testing.T) {
	c := testCluster(t, 3, 3, 3000) // 1000 ops/s per range
	c.heartbeat(nil)
	c.loop.RunUntil(epoch.Add(500 * time.Millisecond))
	c.kill(c.order[0].leader)
	c.loop.RunUntil(epoch.Add(time.Second))
	if s := c.heartbeat(nil); math.Abs(s.errors-500) > 1e-6 || math.Abs(s.ops-2500) > 1e-6 {
		t.Fatalf("leaderless for half the second: served %.1f, refused %.1f; want 2500, 500", s.ops, s.errors)
	}
	c.loop.RunUntil(epoch.Add(2 * time.Second))
	if s := c.heartbeat(nil); math.Abs(s.errors-1000) > 1e-6 {
		t.Fatalf("leaderless all second: refused %.1f, want 1000", s.errors)
	}
}
