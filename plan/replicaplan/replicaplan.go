// Package replicaplan decides how many read replicas each range gets, and on which nodes, from how
// popular it is: Ghosh's Getafix (thesis chapter 4). A range's popularity decays by half each round
// and adds the round's reads (eq. 4.1); ModifiedBestFit (Alg. 4.1) packs the ranges' reads onto the
// nodes, most popular first, each into the node it fills most exactly (Best Fit), splitting a range
// over the fullest-hole node only when none can hold it whole: a load-balanced assignment (the
// optimal makespan) that, by the thesis's Theorem 4.4, uses the fewest replicas. The logical nodes
// are then mapped onto the physical ones so that as many replicas as possible stay where they are
// (Hungarian matching: fewest snapshots). Uniform and proportional (Scarlett-like) rules are here as
// the baselines to compare against.
//
// ModifiedBestFitPlaced is the variant over replicas that exist already (a range's voters): only the
// reads they cannot take within the rooms get new replicas.
//
// It is a leaf: ranges are ids with read counts, nodes are ids with capacities. It never reads a
// cluster or adds a replica; the read_replicas policy turns its plan into operators.
package replicaplan

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"

	"github.com/shoaldb/shoal/plan/assign"
)

// Decay is eq. 4.1: a range's popularity after a round with reads reads.
func Decay(prev, reads float64) float64 { return prev/2 + reads }

// Segment is one range and its popularity in whole reads (the balls of its colour).
type Segment struct {
	ID    uint64
	Count int
}

// Plan is where each range's reads go: Bins[b] maps range ids to the reads logical node b serves.
type Plan struct {
	Bins []map[uint64]int
}

// Replicas counts the plan's replicas: the ranges each node serves, summed.
func (p Plan) Replicas() int {
	n := 0
	for _, b := range p.Bins {
		n += len(b)
	}
	return n
}

// Makespan is the most reads any node serves.
func (p Plan) Makespan() int {
	m := 0
	for _, b := range p.Bins {
		s := 0
		for _, c := range b {
			s += c
		}
		m = max(m, s)
	}
	return m
}

// ReplicasOf is how many nodes serve range id.
func (p Plan) ReplicasOf(id uint64) int {
	n := 0
	for _, b := range p.Bins {
		if b[id] > 0 {
			n++
		}
	}
	return n
}

// ModifiedBestFit is Alg. 4.1 over n nodes of equal capacity ⌈Σ counts / n⌉, or, with capacities
// set (len n, each node's share of the service capacity), each node's share of the load in
// proportion (Capacity-Aware ModifiedBestFit, §4.4), rounded up.
func ModifiedBestFit(segs []Segment, n int, capacities []float64) (Plan, error) {
	if n <= 0 {
		return Plan{}, fmt.Errorf("replicaplan: %d nodes", n)
	}
	if capacities != nil && len(capacities) != n {
		return Plan{}, fmt.Errorf("replicaplan: %d capacities for %d nodes", len(capacities), n)
	}
	total := 0
	for _, s := range segs {
		if s.Count < 0 {
			return Plan{}, fmt.Errorf("replicaplan: range %d has a negative count", s.ID)
		}
		total += s.Count
	}
	room := make([]int, n)
	capSum := 0.0
	for _, c := range capacities {
		capSum += c
	}
	for b := range room {
		room[b] = (total + n - 1) / n
		if capacities != nil && capSum > 0 {
			room[b] = int(math.Ceil(float64(total) * capacities[b] / capSum))
		}
	}
	p := Plan{Bins: make([]map[uint64]int, n)}
	for b := range p.Bins {
		p.Bins[b] = map[uint64]int{}
	}
	queue := segHeap(slices.Clone(segs))
	heap.Init(&queue)
	for queue.Len() > 0 {
		s := heap.Pop(&queue).(Segment) // the most popular left (ties: the lower id)
		if s.Count == 0 {
			continue
		}
		bin := -1
		for b, r := range room { // Best Fit: the least room left after taking it whole
			if r >= s.Count && (bin < 0 || r < room[bin]) {
				bin = b
			}
		}
		take := s.Count
		if bin < 0 { // none fits it whole: Largest Fit, fill it, the rest goes back in the queue
			for b, r := range room {
				if bin < 0 || r > room[bin] {
					bin = b
				}
			}
			take = room[bin]
		}
		if take <= 0 {
			return Plan{}, fmt.Errorf("replicaplan: no room left for range %d's %d reads", s.ID, s.Count)
		}
		p.Bins[bin][s.ID] += take
		room[bin] -= take
		if left := s.Count - take; left > 0 {
			heap.Push(&queue, Segment{ID: s.ID, Count: left})
		}
	}
	return p, nil
}

// segHeap is a max-heap of segments by count, then by lower id: Alg. 4.1's priority queue.
type segHeap []Segment

func (h segHeap) Len() int { return len(h) }
func (h segHeap) Less(i, j int) bool {
	return h[i].Count > h[j].Count || (h[i].Count == h[j].Count && h[i].ID < h[j].ID)
}
func (h segHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *segHeap) Push(x any)   { *h = append(*h, x.(Segment)) }
func (h *segHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Uniform is the baseline of k replicas of every range on consecutive nodes (round robin), each
// serving an equal part of its reads.
func Uniform(segs []Segment, n, k int) Plan {
	k = min(max(k, 1), n)
	p := Plan{Bins: make([]map[uint64]int, n)}
	for b := range p.Bins {
		p.Bins[b] = map[uint64]int{}
	}
	for i, s := range segs {
		for j := range k {
			share := s.Count / k
			if j < s.Count%k {
				share++
			}
			p.Bins[(i+j)%n][s.ID] += share
		}
	}
	return p
}

// Proportional is a Scarlett-like baseline: replicas in proportion to popularity (at least one,
// ⌈n·count/total⌉), each on the least loaded nodes not holding the range yet, its reads split evenly.
func Proportional(segs []Segment, n int) Plan {
	total := 0
	for _, s := range segs {
		total += s.Count
	}
	p := Plan{Bins: make([]map[uint64]int, n)}
	load := make([]int, n)
	for b := range p.Bins {
		p.Bins[b] = map[uint64]int{}
	}
	order := slices.Clone(segs)
	slices.SortStableFunc(order, func(a, b Segment) int { return cmp.Compare(b.Count, a.Count) })
	for _, s := range order {
		k := 1
		if total > 0 {
			k = min(n, max(1, int(math.Ceil(float64(n*s.Count)/float64(total)))))
		}
		nodes := make([]int, n)
		for i := range nodes {
			nodes[i] = i
		}
		slices.SortStableFunc(nodes, func(a, b int) int { return cmp.Compare(load[a], load[b]) })
		for j, b := range nodes[:k] {
			share := s.Count / k
			if j < s.Count%k {
				share++
			}
			p.Bins[b][s.ID] += share
			load[b] += share
		}
	}
	return p
}

// MapToNodes assigns the plan's logical nodes to physical ones (nodes, in the plan's order of
// length) so that the most replicas stay where they are: current[i] is the ranges node i holds now.
// It returns, for each logical node, the index of its physical node, and the replicas that must be
// created (snapshots). The assignment is optimal (Hungarian algorithm over the overlap).
func MapToNodes(p Plan, current [][]uint64) ([]int, int, error) {
	n := len(p.Bins)
	if len(current) != n {
		return nil, 0, fmt.Errorf("replicaplan: %d current nodes for %d logical ones", len(current), n)
	}
	cost := make([][]float64, n)
	for l, b := range p.Bins {
		cost[l] = make([]float64, n)
		for ph, held := range current {
			keep := 0
			for _, id := range held {
				if b[id] > 0 {
					keep++
				}
			}
			cost[l][ph] = float64(len(b) - keep) // replicas to create if l goes to ph
		}
	}
	to := assign.Min(cost)
	created := 0
	for l, ph := range to {
		created += int(cost[l][ph])
	}
	return to, created, nil
}
