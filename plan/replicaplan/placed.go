package replicaplan

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// Rooms is each of n nodes' share of total reads with the imbalance γ allowed on top: ⌈(1+γ)·total/n⌉,
// or, with capacities (len n), each node's part of (1+γ)·total in proportion to its capacity, rounded
// up (Capacity-Aware, §4.4.4). With γ 0 and no capacities it is Alg. 4.1's capacity.
func Rooms(total, n int, capacities []float64, gamma float64) ([]int, error) {
	if n <= 0 {
		return nil, fmt.Errorf("replicaplan: %d nodes", n)
	}
	if capacities != nil && len(capacities) != n {
		return nil, fmt.Errorf("replicaplan: %d capacities for %d nodes", len(capacities), n)
	}
	capSum := 0.0
	for _, c := range capacities {
		capSum += c
	}
	out := make([]int, n)
	for b := range out {
		share := float64(total) / float64(n)
		if capacities != nil && capSum > 0 {
			share = float64(total) * capacities[b] / capSum
		}
		out[b] = int(math.Ceil(share*(1+max(gamma, 0)) - 1e-9))
	}
	return out, nil
}

// Placed is a plan over replicas that exist already: Plan's bins hold every range's reads, and New
// lists, per bin, the ranges it serves without a pre-placed replica there (the replicas to create).
type Placed struct {
	Plan
	New []map[uint64]bool
}

// Created counts the replicas the plan creates.
func (p Placed) Created() int {
	n := 0
	for _, b := range p.New {
		n += len(b)
	}
	return n
}

// ModifiedBestFitPlaced is ModifiedBestFit when some replicas exist already and cost nothing: a
// range's voters, which take their share of its reads wherever the routing sends them by load.
// placed[id] lists the bins holding a replica of range id; room[b] is the most reads bin b may
// serve (Rooms). Bins are in order of preference: ties go to the lower bin.
//
// First the reads go to the replicas that exist, as many as the rooms allow (a maximum flow: each
// range most popular first into its own bins by Best Fit, then augmenting paths that shift another
// range's reads to one of its other bins to make room); then what is left of each range is packed by
// ModifiedBestFit into the rooms left, each part a new replica. Which ranges the existing replicas
// absorb whole decides what is left to pack: it is tried most popular first (Alg. 4.1's order) and
// least popular first (a small range absorbed whole needs no replica, a large one spills either
// way), and the plan with fewer new replicas wins. The residual rooms are unequal, where Theorem 4.4
// does not hold (the problem is then NP-hard, as bin packing): the test against a brute-force
// optimum says how far from the fewest new replicas it lands.
//
// The ranges in fixed are to get no new replica (the caller would not create one: too cold to be
// worth it): they go to their replicas before every other range, so that what is left over falls
// on the others where it can.
func ModifiedBestFitPlaced(segs []Segment, room []int, placed map[uint64][]int, fixed map[uint64]bool) (Placed, error) {
	best, err := placedInOrder(segs, room, placed, fixed, false)
	if err != nil {
		return best, err
	}
	if best.Created() == 0 {
		return best, nil
	}
	if p, err := placedInOrder(segs, room, placed, fixed, true); err == nil && p.Created() < best.Created() {
		return p, nil
	}
	return best, nil
}

// placedInOrder is ModifiedBestFitPlaced with the existing replicas filled in one order: most
// popular first, or (ascending) least popular first, the fixed ranges before all others.
func placedInOrder(segs []Segment, room []int, placed map[uint64][]int, fixed map[uint64]bool, ascending bool) (Placed, error) {
	n := len(room)
	if n == 0 {
		return Placed{}, fmt.Errorf("replicaplan: no nodes")
	}
	total, capacity := 0, 0
	for _, s := range segs {
		if s.Count < 0 {
			return Placed{}, fmt.Errorf("replicaplan: range %d has a negative count", s.ID)
		}
		total += s.Count
		for _, b := range placed[s.ID] {
			if b < 0 || b >= n {
				return Placed{}, fmt.Errorf("replicaplan: range %d placed on bin %d of %d", s.ID, b, n)
			}
		}
	}
	for _, r := range room {
		capacity += max(r, 0)
	}
	if capacity < total {
		return Placed{}, fmt.Errorf("replicaplan: %d reads, room for %d", total, capacity)
	}
	f := newFlow(room, placed)
	order := slices.Clone(segs)
	slices.SortStableFunc(order, func(a, b Segment) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return cmp.Compare(a.ID, b.ID)
	})
	fillOrder := slices.Clone(order)
	if ascending {
		slices.Reverse(fillOrder)
	}
	slices.SortStableFunc(fillOrder, func(a, b Segment) int { // the fixed first, in that order
		if fixed[a.ID] == fixed[b.ID] {
			return 0
		}
		if fixed[a.ID] {
			return -1
		}
		return 1
	})
	left := map[uint64]int{}
	for _, s := range fillOrder {
		if l := f.fill(s.ID, s.Count, placed[s.ID]); l > 0 {
			left[s.ID] = l
		}
	}
	for _, s := range fillOrder {
		for left[s.ID] > 0 {
			moved := f.augment(s.ID, left[s.ID])
			if moved == 0 {
				break
			}
			left[s.ID] -= moved
		}
	}
	p := Placed{Plan: Plan{Bins: f.bins}, New: make([]map[uint64]bool, n)}
	for b := range p.New {
		p.New[b] = map[uint64]bool{}
	}
	var queue segHeap
	for _, s := range order {
		if left[s.ID] > 0 {
			queue = append(queue, Segment{ID: s.ID, Count: left[s.ID]})
		}
	}
	heap.Init(&queue)
	for queue.Len() > 0 {
		s := heap.Pop(&queue).(Segment)
		bin := -1
		for b, r := range f.room { // Best Fit over the rooms left
			if r >= s.Count && (bin < 0 || r < f.room[bin]) {
				bin = b
			}
		}
		take := s.Count
		if bin < 0 { // Largest Fit
			for b, r := range f.room {
				if bin < 0 || r > f.room[bin] {
					bin = b
				}
			}
			take = f.room[bin]
		}
		if take <= 0 {
			return Placed{}, fmt.Errorf("replicaplan: no room left for range %d's %d reads", s.ID, s.Count)
		}
		f.add(s.ID, bin, take)
		p.New[bin][s.ID] = true
		if rest := s.Count - take; rest > 0 {
			heap.Push(&queue, Segment{ID: s.ID, Count: rest})
		}
	}
	return p, nil
}

// flow is the reads assigned so far: bins[b][id] reads of range id on bin b, room[b] left.
// members[b] lists the ranges that ever had reads on b, in the order they came (a deterministic
// order to search in); edges[b][c] counts the ranges with reads on b and a replica on c (the paths
// a search may take, kept as the reads move); dead[b] marks a bin from which no path leads to room,
// which stays so.
type flow struct {
	bins    []map[uint64]int
	room    []int
	members [][]uint64
	edges   [][]int32
	placed  map[uint64][]int
	dead    []bool
}

func newFlow(room []int, placed map[uint64][]int) *flow {
	f := &flow{bins: make([]map[uint64]int, len(room)), room: make([]int, len(room)),
		members: make([][]uint64, len(room)), edges: make([][]int32, len(room)), placed: placed, dead: make([]bool, len(room))}
	for b := range f.edges {
		f.edges[b] = make([]int32, len(room))
	}
	for b := range room {
		f.bins[b] = map[uint64]int{}
		f.room[b] = max(room[b], 0)
	}
	return f
}

func (f *flow) add(id uint64, b, c int) {
	before, ok := f.bins[b][id]
	if !ok {
		f.members[b] = append(f.members[b], id)
	}
	after := before + c
	f.bins[b][id] = after
	if after == 0 {
		delete(f.bins[b], id)
	}
	f.room[b] -= c
	if (before > 0) != (after > 0) {
		d := int32(1)
		if after == 0 {
			d = -1
		}
		for _, nb := range f.placed[id] {
			f.edges[b][nb] += d
		}
	}
}

// fill puts up to count reads of range id on its bins, Best Fit then Largest Fit (Alg. 4.1's choice
// restricted to them); it returns the reads left over.
func (f *flow) fill(id uint64, count int, bins []int) int {
	for count > 0 {
		bin := -1
		for _, b := range bins {
			if f.room[b] >= count && (bin < 0 || f.room[b] < f.room[bin] || f.room[b] == f.room[bin] && b < bin) {
				bin = b
			}
		}
		take := count
		if bin < 0 {
			for _, b := range bins {
				if bin < 0 || f.room[b] > f.room[bin] || f.room[b] == f.room[bin] && b < bin {
					bin = b
				}
			}
			if bin < 0 || f.room[bin] <= 0 {
				return count
			}
			take = f.room[bin]
		}
		f.add(id, bin, take)
		count -= take
	}
	return 0
}

// augment finds a path that makes room for range id on one of its bins — another range's reads
// shifted from that bin to another of its own, and so on until a bin with room — and moves up to
// want reads along it; it returns how many moved (0: the flow is maximal for id). A search that
// finds no room marks every bin it reached dead: their ranges' other bins are among them, so no
// later path can pass through them to room either.
func (f *flow) augment(id uint64, want int) int {
	n := len(f.room)
	type hop struct {
		from int    // the bin before (-1: id's own reads)
		seg  uint64 // the range whose reads move from `from` to this bin
	}
	prev := make([]hop, n)
	seen := make([]bool, n)
	var q []int
	for _, b := range f.placed[id] {
		if !seen[b] && !f.dead[b] {
			seen[b], prev[b] = true, hop{from: -1, seg: id}
			q = append(q, b)
		}
	}
	target := -1
	reached := q
	for i := 0; i < len(q) && target < 0; i++ {
		b := q[i]
		if f.room[b] > 0 {
			target = b
			break
		}
		for nb, e := range f.edges[b] {
			if e > 0 && !seen[nb] && !f.dead[nb] {
				seen[nb], prev[nb] = true, hop{from: b}
				q = append(q, nb)
			}
		}
		reached = q
	}
	if target < 0 {
		for _, b := range reached {
			f.dead[b] = true
		}
		return 0
	}
	amount := min(want, f.room[target])
	for b := target; prev[b].from >= 0; b = prev[b].from {
		prev[b].seg = f.mover(prev[b].from, b)
		amount = min(amount, f.bins[prev[b].from][prev[b].seg])
	}
	for b := target; ; b = prev[b].from {
		h := prev[b]
		f.add(h.seg, b, amount)
		if h.from < 0 {
			break
		}
		f.add(h.seg, h.from, -amount)
	}
	return amount
}

// mover is the first range (in members' order) with reads on bin from and a replica on bin to.
func (f *flow) mover(from, to int) uint64 {
	for _, id := range f.members[from] {
		if f.bins[from][id] > 0 && slices.Contains(f.placed[id], to) {
			return id
		}
	}
	panic("replicaplan: an edge without a range") // edges counts exactly these ranges
}
