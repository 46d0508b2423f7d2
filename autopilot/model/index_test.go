package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// randomCluster builds a cluster of n nodes and r ranges with IDs spaced by stride (1: dense, so
// lookups use slices; large: sparse, so they use maps), random replicas, learners and leaders, and,
// with stray, a replica on a node the cluster does not list.
func randomCluster(rng *rand.Rand, n, r int, stride uint64, stray bool) *Cluster {
	var nodes []*Node
	for i := 1; i <= n; i++ {
		nodes = append(nodes, &Node{ID: uint64(i) * stride, Live: true})
	}
	var ranges []*Range
	ranges = append(ranges, &Range{ID: 1, System: true, Replicas: []Replica{{Node: stride}}, Leader: stride})
	for i := 0; i < r; i++ {
		rg := &Range{ID: uint64(i+2) * stride, StartKey: []byte(fmt.Sprintf("k%05d", i)), EndKey: []byte(fmt.Sprintf("k%05d", i+1))}
		if i == r-1 {
			rg.EndKey = nil
		}
		perm := rng.Perm(n)
		for j := 0; j < min(3, n); j++ {
			rg.Replicas = append(rg.Replicas, Replica{Node: uint64(perm[j]+1) * stride, Learner: rng.IntN(5) == 0})
		}
		if rng.IntN(10) > 0 {
			rg.Leader = rg.Replicas[rng.IntN(len(rg.Replicas))].Node
		}
		if i == 3 && stray {
			rg.Replicas = append(rg.Replicas, Replica{Node: 999_999_999}) // a node not in the cluster
		}
		ranges = append(ranges, rg)
	}
	rng.Shuffle(len(ranges), func(i, j int) { ranges[i], ranges[j] = ranges[j], ranges[i] })
	return NewCluster(time.Unix(0, 0), nodes, ranges)
}

// TestPerNodeIndex: RangesOf, LedBy, UserVoters, Node, Range and RightNeighborAt say what a scan of
// every range says, for dense and sparse IDs.
func TestPerNodeIndex(t *testing.T) {
	for _, tc := range []struct {
		stride uint64
		stray  bool
	}{{1, false}, {1, true}, {1 << 20, false}, {1 << 20, true}} {
		stride := tc.stride
		t.Run(fmt.Sprintf("stride=%d,stray=%v", stride, tc.stray), func(t *testing.T) {
			c := randomCluster(rand.New(rand.NewPCG(1, stride)), 7, 200, stride, tc.stray)
			if c.strays != tc.stray {
				t.Fatalf("strays %v", c.strays)
			}
			if (c.rangeAt != nil) != (stride == 1) || (c.nodeAt != nil) != (stride == 1) {
				t.Fatalf("dense lookups %v/%v for stride %d", c.nodeAt != nil, c.rangeAt != nil, stride)
			}
			voters := 0
			for _, r := range c.Ranges {
				if c.Range(r.ID) != r {
					t.Fatalf("Range(%d) wrong", r.ID)
				}
				if !r.System {
					voters += len(r.Voters())
				}
			}
			if c.UserVoters() != voters {
				t.Fatalf("UserVoters %d, want %d", c.UserVoters(), voters)
			}
			ids := []uint64{0, 999_999_999, 12345 * stride}
			for _, n := range c.Nodes {
				ids = append(ids, n.ID)
				if c.Node(n.ID) != n {
					t.Fatalf("Node(%d) wrong", n.ID)
				}
			}
			for _, id := range ids {
				var held, led []*Range
				for _, r := range c.Ranges {
					if r.HasReplica(id) {
						held = append(held, r)
					}
					if r.Leader == id && id != 0 {
						led = append(led, r)
					}
				}
				if !slices.Equal(slices.Collect(c.RangesOf(id)), held) || !slices.Equal(slices.Collect(c.LedBy(id)), led) {
					t.Fatalf("n%d: RangesOf %v LedBy %v, want %v %v", id, slices.Collect(c.RangesOf(id)),
						slices.Collect(c.LedBy(id)), held, led)
				}
			}
			if c.Node(12345*stride) != nil || c.Range(1<<40) != nil {
				t.Fatal("lookup of an unknown ID found something")
			}
			for i, r := range c.UserRanges() {
				if got, want := c.RightNeighborAt(i), c.RightNeighbor(r); got != want {
					t.Fatalf("RightNeighborAt(%d) = %v, want %v", i, got, want)
				}
			}
		})
	}
}

// TestRightNeighborAtGapsAndOverlaps: where the next range does not start at the end key (a gap) or
// two ranges start at the same key (descriptors in flux), RightNeighborAt agrees with the search.
func TestRightNeighborAtGapsAndOverlaps(t *testing.T) {
	c, err := ParseCluster(`
range 2 [a,c) voters=1
range 3 [d,f) voters=1
range 4 [f,h) voters=1
range 5 [f,g) voters=1
range 6 [h,) voters=1
`)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range c.UserRanges() {
		if got, want := c.RightNeighborAt(i), c.RightNeighbor(r); got != want {
			t.Errorf("r%d: RightNeighborAt %v, RightNeighbor %v", r.ID, got, want)
		}
	}
}

// TestNewClusterKeepsASortedSourcesOrder: ranges given in order are not re-sorted (the check is a
// pass), and given out of order they are sorted as before: system first, then by start key and ID.
func TestNewClusterKeepsASortedSourcesOrder(t *testing.T) {
	mk := func() []*Range {
		return []*Range{{ID: 9, System: true}, {ID: 3, StartKey: []byte("a")}, {ID: 2, StartKey: []byte("b")}, {ID: 5, StartKey: []byte("b")}}
	}
	want := []uint64{9, 3, 2, 5}
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}} {
		src := mk()
		var in []*Range
		for _, i := range order {
			in = append(in, src[i])
		}
		c := NewCluster(time.Unix(0, 0), nil, in)
		var got []uint64
		for _, r := range c.Ranges {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("order %v: %v, want %v", order, got, want)
		}
	}
}

// TestNewClusterAfterSortsAsNewCluster: with the previous snapshot's ranges shared, in place or
// moved out of order, NewClusterAfter orders the ranges as NewCluster does.
func TestNewClusterAfterSortsAsNewCluster(t *testing.T) {
	prev := randomCluster(rand.New(rand.NewPCG(5, 6)), 5, 50, 1, false)
	for name, perturb := range map[string]func([]*Range){
		"unchanged": func([]*Range) {},
		"swapped":   func(rs []*Range) { rs[10], rs[30] = rs[30], rs[10] },
		"replaced": func(rs []*Range) {
			r := *rs[20]
			r.StartKey = []byte("a") // now sorts before every user range
			rs[20] = &r
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := append([]*Range(nil), prev.Ranges...)
			perturb(in)
			want := NewCluster(prev.Now, nil, append([]*Range(nil), in...))
			got := NewClusterAfter(prev, prev.Now, nil, append([]*Range(nil), in...))
			if !slices.Equal(got.Ranges, want.Ranges) {
				t.Fatalf("order differs from NewCluster's")
			}
		})
	}
}

// TestNewClusterAfterDerivesAsNewCluster: over a chain of snapshots in which ranges change leader,
// load, size and replicas (a learner added, promoted, a voter removed) and nodes come and go, each
// NewClusterAfter of the previous snapshot derives what NewCluster derives: node totals (QPS to the
// last bit), lookups by ID, user ranges, user voters and the per-node index (also when the previous
// snapshot's index was never built).
func TestNewClusterAfterDerivesAsNewCluster(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	base := randomCluster(rng, 6, 300, 1, false)
	ranges := base.Ranges
	ids := []uint64{1, 2, 3, 4, 5, 6}
	nodes := func() []*Node {
		var out []*Node
		for _, id := range ids {
			out = append(out, &Node{ID: id, Live: true})
		}
		return out
	}
	prev := NewCluster(base.Now, nodes(), append([]*Range(nil), ranges...))
	var back []*Cluster // the last snapshots, for ChangedSince
	told := 0
	for step := 0; step < 300; step++ {
		next := append([]*Range(nil), ranges...)
		for k := rng.IntN(6); k > 0; k-- {
			i := rng.IntN(len(next))
			r := *next[i]
			r.Replicas = append([]Replica(nil), r.Replicas...)
			switch rng.IntN(5) {
			case 0:
				r.Leader = r.Replicas[rng.IntN(len(r.Replicas))].Node
			case 1:
				r.ReadQPS, r.WriteQPS = rng.Float64()*1000, rng.Float64()*100
			case 2:
				r.Bytes = uint64(rng.IntN(1 << 30))
			case 3:
				if n := uint64(1 + rng.IntN(len(ids))); !r.HasReplica(n) {
					r.Replicas = append(r.Replicas, Replica{Node: ids[n-1], Learner: true})
				}
			case 4:
				if len(r.Replicas) > 1 {
					r.Replicas = r.Replicas[1:]
					r.Replicas[0].Learner = false
				}
			}
			next[i] = &r
		}
		switch {
		case step == 100:
			ids = append(ids, 7) // a node joins: shapes differ, a full pass
		case step == 200:
			ids = ids[:6]
		}
		ranges = next
		got := NewClusterAfter(prev, base.Now, nodes(), append([]*Range(nil), ranges...))
		want := NewCluster(base.Now, nodes(), append([]*Range(nil), ranges...))
		for i, n := range want.Nodes {
			g := got.Nodes[i]
			if g.ID != n.ID || g.Replicas != n.Replicas || g.Voters != n.Voters || g.Leaders != n.Leaders ||
				g.Bytes != n.Bytes || g.QPS != n.QPS {
				t.Fatalf("step %d: n%d totals %+v, want %+v", step, n.ID, *g, *n)
			}
			if step%3 == 1 {
				continue // an index never asked for: the next snapshot patches the one before
			}
			if !slices.Equal(slices.Collect(got.RangesOf(n.ID)), slices.Collect(want.RangesOf(n.ID))) ||
				!slices.Equal(slices.Collect(got.LedBy(n.ID)), slices.Collect(want.LedBy(n.ID))) {
				t.Fatalf("step %d: n%d index differs", step, n.ID)
			}
		}
		if !slices.Equal(got.Ranges, want.Ranges) || !slices.Equal(got.UserRanges(), want.UserRanges()) ||
			got.UserVoters() != want.UserVoters() || got.strays != want.strays {
			t.Fatalf("step %d: ranges, user ranges, user voters or strays differ", step)
		}
		for id := uint64(0); id < 400; id++ {
			if got.Range(id) != want.Range(id) || got.Node(id) != nil && got.Node(id).ID != id {
				t.Fatalf("step %d: lookup of %d differs", step, id)
			}
		}
		back = append(back, prev)
		for k, since := range back[max(0, len(back)-4):] {
			changed, ok := got.ChangedSince(since)
			if !ok {
				continue
			}
			told++
			for i, r := range got.Ranges {
				if r != since.Ranges[i] && !slices.Contains(changed, i) {
					t.Fatalf("step %d: position %d changed since %d snapshots back, not in %v", step, i, k, changed)
				}
			}
		}
		prev = got
	}
	if told < 600 {
		t.Fatalf("ChangedSince told what changed %d times in 300 snapshots of 4 predecessors each", told)
	}
}

// TestNewClusterAfterWithPrevsOwnRanges: a source that hands the previous snapshot's own Ranges
// again (nothing changed) gets the same totals and index as from a copy, and nothing changed.
func TestNewClusterAfterWithPrevsOwnRanges(t *testing.T) {
	prev := randomCluster(rand.New(rand.NewPCG(3, 4)), 5, 100, 1, false)
	nodes := func() []*Node {
		var out []*Node
		for _, n := range prev.Nodes {
			out = append(out, &Node{ID: n.ID, Live: true})
		}
		return out
	}
	got := NewClusterAfter(prev, prev.Now, nodes(), prev.Ranges)
	want := NewCluster(prev.Now, nodes(), append([]*Range(nil), prev.Ranges...))
	for i, n := range want.Nodes {
		g := got.Nodes[i]
		if g.Replicas != n.Replicas || g.Voters != n.Voters || g.Leaders != n.Leaders || g.Bytes != n.Bytes || g.QPS != n.QPS {
			t.Fatalf("n%d totals %+v, want %+v", n.ID, *g, *n)
		}
		if !slices.Equal(slices.Collect(got.RangesOf(n.ID)), slices.Collect(want.RangesOf(n.ID))) {
			t.Fatalf("n%d index differs", n.ID)
		}
	}
	if changed, ok := got.ChangedSince(prev); !ok || len(changed) != 0 {
		t.Fatalf("ChangedSince = %v, %v; want none, true", changed, ok)
	}
}

// TestChangedSinceForgetsOldAndForkedSnapshots: a snapshot further back than the history keeps, or
// one patched twice (a fork), or one of another chain gets "cannot tell"; a recent one gets the
// places changed since, each once.
func TestChangedSinceForgetsOldAndForkedSnapshots(t *testing.T) {
	base := randomCluster(rand.New(rand.NewPCG(5, 5)), 4, 50, 1, false)
	nodes := func() []*Node {
		var out []*Node
		for _, n := range base.Nodes {
			out = append(out, &Node{ID: n.ID, Live: true})
		}
		return out
	}
	chain := []*Cluster{NewCluster(base.Now, nodes(), append([]*Range(nil), base.Ranges...))}
	for step := 0; step < historyLength+10; step++ {
		prev := chain[len(chain)-1]
		next := append([]*Range(nil), prev.Ranges...)
		i := 1 + step%(len(next)-1)
		r := *next[i]
		r.ReadQPS++
		next[i] = &r
		chain = append(chain, NewClusterAfter(prev, base.Now, nodes(), next))
	}
	last := chain[len(chain)-1]
	if _, ok := last.ChangedSince(chain[0]); ok {
		t.Error("told what changed since a snapshot older than the history")
	}
	changed, ok := last.ChangedSince(chain[len(chain)-4])
	if !ok || len(changed) != 3 || !slices.IsSorted(changed) {
		t.Errorf("since 3 back: %v, %v; want 3 ascending places", changed, ok)
	}
	fork := NewClusterAfter(chain[len(chain)-2], base.Now, nodes(), append([]*Range(nil), last.Ranges...))
	if _, ok := fork.ChangedSince(chain[len(chain)-2]); ok {
		t.Error("a second successor of a snapshot shares its history")
	}
	other := NewCluster(base.Now, nodes(), append([]*Range(nil), last.Ranges...))
	if _, ok := last.ChangedSince(other); ok {
		t.Error("told what changed since a snapshot of another chain")
	}
}
