package sim

import (
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/workload"
)

// TestReplicaReadsSpreadOverEveryReplica: with replica reads, every replica of a range, its
// learners too, is offered an equal part of its reads, and the nodes' reads sum to the offered rate.
func TestReplicaReadsSpreadOverEveryReplica(t *testing.T) {
	for _, tt := range []struct {
		name     string
		learners int
		replicas int
	}{{"voters only", 0, 3}, {"two learners", 2, 5}, {"more learners than nodes", 9, 6}} {
		t.Run(tt.name, func(t *testing.T) {
			records := int64(12 * 1000)
			c := newCluster(DefaultParams(), des.New(epoch), 1, clusterSpec{nodes: 6, ranges: 12, rf: 3, records: records,
				valueBytes: 1024, dist: workload.Uniform{N: records}, rate: workload.Constant(6000), readFrac: 1,
				replicaReads: true, learners: tt.learners})
			for _, r := range c.order {
				if len(r.reps) != tt.replicas {
					t.Fatalf("r%d has %d replicas, want %d", r.id, len(r.reps), tt.replicas)
				}
			}
			reads := c.nodeReads()
			var sum float64
			for _, x := range reads {
				sum += x
			}
			if math.Abs(sum-6000) > 1e-6 {
				t.Fatalf("the nodes are offered %v reads/s, want 6000", sum)
			}
			// Uniform load, every node in as many ranges: each takes a sixth of the user ranges' reads.
			meta := c.meta.share * 6000 / float64(len(c.meta.reps))
			for id := 1; id <= 6; id++ {
				want := (6000 - c.meta.share*6000) / 6
				if c.meta.hasReplica(uint64(id)) {
					want += meta
				}
				if math.Abs(reads[id]-want) > 1e-6 {
					t.Fatalf("n%d is offered %v reads/s, want %v", id, reads[id], want)
				}
			}
			rep := c.readReport()
			if rep.Learners != 12*(tt.replicas-3) || rep.ReplicasPerRange != float64(tt.replicas) {
				t.Fatalf("read report %+v: want %d learners, %d replicas a range", rep, 12*(tt.replicas-3), tt.replicas)
			}
		})
	}
}

// TestReplicaReadUnitsCountedAgainEqualFullCount: with replica reads, the load per unit recounted
// for the nodes whose ranges changed equals a count over every range, to the last bit.
func TestReplicaReadUnitsCountedAgainEqualFullCount(t *testing.T) {
	verifyUnits = true
	defer func() { verifyUnits = false }()
	records := int64(8 * 1000)
	c := newCluster(DefaultParams(), des.New(epoch), 1, clusterSpec{nodes: 5, ranges: 8, rf: 3, records: records,
		valueBytes: 1024, dist: workload.NewZipfian(records), rate: workload.Constant(6000), readFrac: 0.9, replicaReads: true})
	c.computeUnits()
	r := c.order[3]
	for n := uint64(1); n <= 5; n++ {
		if !r.hasReplica(n) {
			if err := c.AddLearner(t.Context(), r.id, n); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	c.loop.RunUntil(epoch.Add(time.Minute))
	c.computeUnits() // panics if the partial count differs
	if len(r.reps) != 4 {
		t.Fatalf("r%d has %d replicas after a learner landed", r.id, len(r.reps))
	}
}

// TestReadReplicasScaleScenario runs the scale comparison small (20 nodes, 2 000 ranges, the same
// reads per node): the policy's learners by popularity hold less than half the bytes of two learners
// on every range, and leave the hottest node within the imbalance cap γ (20 %) of uniform's and of
// the mean. (Here the voters take every range's reads within the rooms, so it adds none.)
func TestReadReplicasScaleScenario(t *testing.T) {
	sc, ok := Lookup("read-replicas-scale")
	if !ok {
		t.Fatal("no read-replicas-scale scenario")
	}
	sc.OpsPerSec = sc.OpsPerSec / 10 // the same reads per node
	res, err := Run(sc, Options{Nodes: 20, Ranges: 2000, Duration: 5 * time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	on, off := res.Report.Runs[0].Reads, res.Report.Runs[1].Reads
	if on == nil || off == nil {
		t.Fatal("no read report")
	}
	t.Logf("popularity: %+v", *on)
	t.Logf("uniform: %+v", *off)
	if off.Learners != 2*2000 {
		t.Fatalf("the uniform run has %d learners, want 4000", off.Learners)
	}
	if 2*on.LearnerBytes >= off.LearnerBytes {
		t.Fatalf("the policy's learners hold %d bytes against uniform's %d", on.LearnerBytes, off.LearnerBytes)
	}
	if on.HottestNodeReads > 1.2*off.HottestNodeReads || on.HottestNodeReads > 1.2*on.MeanNodeReads {
		t.Fatalf("the hottest node reads %v/s with the policy, %v/s with uniform learners", on.HottestNodeReads, off.HottestNodeReads)
	}
}
