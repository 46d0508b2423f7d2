package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// TestLoadMemoryIncrementalMatchesFull: folding in only the ranges a snapshot chain says changed
// gives every range's and every node's smoothed rate that folding in every range of a fresh,
// unchained snapshot gives, over rounds in which some ranges change rate or leader.
func TestLoadMemoryIncrementalMatchesFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const nRanges, nNodes = 40, 4
	var nodes []*model.Node
	for i := 1; i <= nNodes; i++ {
		nodes = append(nodes, &model.Node{ID: uint64(i), Live: true})
	}
	ranges := make([]*model.Range, nRanges)
	for i := range ranges {
		ranges[i] = &model.Range{ID: uint64(i + 1), StartKey: []byte(fmt.Sprintf("k%03d", i)),
			EndKey: []byte(fmt.Sprintf("k%03d", i+1)), Leader: uint64(1 + i%nNodes), ReadQPS: float64(rng.IntN(1000))}
	}
	now := model.TextEpoch
	inc, full := newLoadMemory(20*time.Second, 2*time.Minute), newLoadMemory(20*time.Second, 2*time.Minute)
	var prev *model.Cluster
	for round := 0; round < 60; round++ {
		now = now.Add(time.Second)
		next := make([]*model.Range, nRanges)
		copy(next, ranges)
		for k := 0; k < 3; k++ { // a few ranges change: a new rate or a new leader
			i := rng.IntN(nRanges)
			r := *next[i]
			if rng.IntN(2) == 0 {
				r.ReadQPS = float64(rng.IntN(1000))
			} else {
				r.Leader = uint64(1 + rng.IntN(nNodes))
			}
			next[i] = &r
		}
		ranges = next
		chained := model.NewClusterAfter(prev, now, nodes, append([]*model.Range(nil), ranges...))
		if _, ok := chained.ChangedSince(prev); !ok && prev != nil {
			t.Fatal("the chain cannot tell what changed: the test would not exercise the incremental path")
		}
		prev = chained
		inc.update(chained)
		full.update(model.NewCluster(now, nodes, append([]*model.Range(nil), ranges...)))
		for _, r := range ranges {
			if a, b := inc.qps(r), full.qps(r); math.Abs(a-b) > 1e-6 {
				t.Fatalf("round %d r%d: incremental %.9f, full %.9f", round, r.ID, a, b)
			}
		}
		for _, n := range nodes {
			if a, b := inc.nodeQPS(n.ID), full.nodeQPS(n.ID); math.Abs(a-b) > 1e-6 {
				t.Fatalf("round %d n%d: incremental %.9f, full %.9f", round, n.ID, a, b)
			}
		}
	}
}
