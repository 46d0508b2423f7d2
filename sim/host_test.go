package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/workload"
)

// TestMVA: exact mean value analysis against cases solved by hand: one queue alone serves 1/D
// whatever the customers; one customer takes Z + ΣD per request; two balanced queues with two
// customers serve 2/(3D) (the second customer finds half a customer at each queue); many customers
// tend to the bottleneck's bound 1/D_max and never pass it.
func TestMVA(t *testing.T) {
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*want }
	for _, n := range []int{1, 4, 16} {
		if x := mva(n, 0, []float64{0.002}); !near(x, 500) {
			t.Errorf("one queue, %d customers: %v, want 500", n, x)
		}
	}
	if x := mva(1, 0.001, []float64{0.002, 0.003}); !near(x, 1/0.006) {
		t.Errorf("one customer: %v, want %v", x, 1/0.006)
	}
	if x := mva(2, 0, []float64{0.001, 0.001}); !near(x, 2/0.003) {
		t.Errorf("two customers at two balanced queues: %v, want %v", x, 2/0.003)
	}
	prev := 0.0
	for _, n := range []int{1, 2, 4, 8, 64, 512} {
		x := mva(n, 0.001, []float64{0.0005, 0.002, 0.0001})
		if x < prev || x > 500 {
			t.Errorf("%d customers: %v after %v; want non-decreasing, at most the bound 500", n, x, prev)
		}
		prev = x
	}
	if prev < 0.99*500 {
		t.Errorf("512 customers: %v, want near the bound 500", prev)
	}
}

// TestHitRatio: an ideal cache of a fraction q of the blocks hits q of uniform reads, more of
// zipfian ones (the hottest blocks), nothing empty and everything full.
func TestHitRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		dist workload.Dist
	}{{"uniform", workload.Uniform{N: 24000}}, {"zipfian", workload.NewZipfian(24000)}} {
		c := hostCluster(t, tc.dist, 2000)
		n := c.node(1)
		hn := c.hostOf(n)
		c.ledCurve(n, hn)
		if hitRatio(hn.curve, 0) != 0 || hitRatio(hn.curve, 1) != 1 {
			t.Errorf("%s: empty %v, full %v", tc.name, hitRatio(hn.curve, 0), hitRatio(hn.curve, 1))
		}
		prev := 0.0
		for _, q := range []float64{0.05, 0.1, 0.3, 0.6, 0.9} {
			h := hitRatio(hn.curve, q)
			if h < prev {
				t.Errorf("%s: hit %v at q %v below %v", tc.name, h, q, prev)
			}
			prev = h
			if tc.name == "uniform" && math.Abs(h-q) > 0.01 {
				t.Errorf("uniform: hit %v at q %v", h, q)
			}
			if tc.name == "zipfian" && h <= q {
				t.Errorf("zipfian: hit %v at q %v, want more (its hottest blocks)", h, q)
			}
		}
	}
}

// hostCluster is three nodes, 24 ranges of 1000 records on a loopback host of disks of iops and
// caches of a fifth of a node's led 8 000 records of 300 B, eight closed-loop threads, read hints off.
func hostCluster(t *testing.T, dist workload.Dist, iops float64) *Cluster {
	t.Helper()
	p := DefaultParams()
	loopback(8, 0, iops, 500*time.Microsecond, 1, 4<<10)(&p)
	p.Host.CacheBytes = 8000 * 300 / 5
	records := int64(24000)
	return newCluster(p, des.New(epoch), 1, clusterSpec{nodes: 3, ranges: 24, rf: 3, records: records,
		valueBytes: 256, dist: dist, rate: workload.Constant(0), readFrac: 0.9})
}

// beat runs the cluster's loop to the next second and heartbeats.
func beat(c *Cluster) second {
	c.loop.RunUntil(c.now().Add(time.Second))
	return c.heartbeat(nil)
}

// TestClosedLoopDiskBound: a cold cluster speeds up as its caches warm, up to the steady hit
// ratio's bound, which a faster disk raises; a node leading more than its share is the bottleneck
// and the whole loop slows to its pace.
func TestClosedLoopDiskBound(t *testing.T) {
	c := hostCluster(t, workload.NewZipfian(24000), 250)
	first := beat(c).ops
	var last float64
	for i := 0; i < 60; i++ {
		last = beat(c).ops
	}
	if last < 1.3*first {
		t.Errorf("cold %.0f ops/s, after a minute %.0f: want the warm caches to serve more", first, last)
	}
	h := c.p.Host
	for _, n := range c.nodes {
		hn := c.hostOf(n)
		// Each node: a third of the reads missing at 1 − hit, every write at WriteIOs.
		ioPerOp := 0.9/3*(1-hn.hit) + 0.1*h.WriteIOs
		if bound := h.IOPS / ioPerOp; last > bound*1.001 {
			t.Errorf("n%d: %.0f ops/s beyond its disk's bound %.0f", n.id, last, bound)
		}
	}
	fast := hostCluster(t, workload.NewZipfian(24000), 1000)
	for i := 0; i < 61; i++ {
		beat(fast)
	}
	if f := beat(fast).ops; f < 2*last {
		t.Errorf("disks 4× as fast: %.0f ops/s against %.0f", f, last)
	}
	// n1 takes every leadership of n2: it leads two thirds of the reads on the same cache.
	for _, r := range c.order {
		if r.leader == 2 {
			r.leader, r.cacheAt = 1, 1
			r.changed()
			c.topo++
		}
	}
	if skewed := beat(c).ops; skewed > 0.8*last {
		t.Errorf("leaders 16/0/8: %.0f ops/s, balanced %.0f: want the busiest disk to slow the loop", skewed, last)
	}
}

// TestNewLeaderStartsCold: a transferred leadership starts with none of its range's blocks cached
// (read hints off), and with hints on (the replicas replay the leader's reads) as warm as the new
// leader's cache, shared with the ranges it led already, holds it.
func TestNewLeaderStartsCold(t *testing.T) {
	var after [2]float64
	for i, hints := range []bool{false, true} {
		c := hostCluster(t, workload.NewZipfian(24000), 250)
		c.hints = hints
		for i := 0; i < 20; i++ {
			beat(c)
		}
		r := c.order[0]
		warm := r.cached
		if err := c.TransferLeader(context.Background(), r.id, r.reps[1].Node); err != nil {
			t.Fatal(err)
		}
		beat(c)
		after[i] = r.cached
		if warm <= 0 || hints && r.cached < warm/2 {
			t.Errorf("hints %v: r%d cached %.0f B at its old leader, %.0f B a second after the transfer", hints, r.id, warm, r.cached)
		}
	}
	if after[0] >= after[1]/4 {
		t.Errorf("cached a second after the transfer: %.0f B without hints, %.0f B with", after[0], after[1])
	}
}

// TestSnapshotStreamCostsTheSender: a snapshot streamed from a node takes disk operations from its
// requests and evicts part of its cache: the second it streams serves less than the one before.
func TestSnapshotStreamCostsTheSender(t *testing.T) {
	c := hostCluster(t, workload.NewZipfian(24000), 250)
	for i := 0; i < 30; i++ {
		beat(c)
	}
	before := beat(c).ops
	r := c.order[0]
	from := c.node(r.leader)
	c.addStream(from, c.node(r.reps[1].Node), c.now(), c.now().Add(time.Second), r)
	during := beat(c).ops
	if during >= 0.95*before || c.hostOf(from).polluted <= 0 {
		t.Errorf("r%d streamed in a second from n%d: %.0f ops/s against %.0f before, %.0f B of its cache polluted", r.id,
			from.id, during, before, c.hostOf(from).polluted)
	}
}

// TestHostOffKeepsTheOpenLoop: a scenario without client threads serves its offered rate.
func TestHostOffKeepsTheOpenLoop(t *testing.T) {
	c := testCluster(t, 3, 3, 3000)
	if s := c.heartbeat(nil); math.Abs(s.ops-3000) > 1e-6 {
		t.Fatalf("served %.1f of an open loop's 3000 ops/s", s.ops)
	}
}
