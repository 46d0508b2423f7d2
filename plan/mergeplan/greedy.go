package mergeplan

import (
	"cmp"
	"slices"
)

// node is a run or a merge output not yet merged further.
type node struct {
	id    int
	set   Set
	level int // BalanceTree's level: 1 for runs, one more than the level merged for outputs
}

// greedy is the thesis's GreedyBinaryMerging (Algorithm 5.1) generalised to k inputs: a collection of
// live nodes from which a strategy chooses the next merge until one node is left.
type greedy struct {
	k      int
	plan   Plan
	live   []*node
	unions map[[2]int]float64 // |A ∪ B| of node pairs, by ids: SmallestOutput reuses them across steps
}

func (g *greedy) all() []int {
	idx := make([]int, len(g.live))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// merge replaces the live nodes at idx by their union and records the step.
func (g *greedy) merge(idx []int) {
	slices.Sort(idx)
	in := make([]int, len(idx))
	u := g.live[idx[0]].set
	level := 0
	for i, x := range idx {
		n := g.live[x]
		in[i] = n.id
		if i > 0 {
			u = u.Union(n.set)
		}
		level = max(level, n.level)
	}
	id := g.plan.Runs + len(g.plan.Merges)
	g.plan.Merges = append(g.plan.Merges, Merge{Inputs: in})
	for i := len(idx) - 1; i >= 0; i-- {
		g.live = slices.Delete(g.live, idx[i], idx[i]+1)
	}
	g.live = append(g.live, &node{id: id, set: u, level: level + 1})
}

// balanced is BalanceTree: among the nodes of the lowest level, pick merges them; a node alone at its
// level moves up one (so the tree's height is ⌈log_k n⌉).
func (g *greedy) balanced(pick func([]int) []int) []int {
	for {
		minL := g.live[0].level
		for _, n := range g.live {
			minL = min(minL, n.level)
		}
		var at []int
		for i, n := range g.live {
			if n.level == minL {
				at = append(at, i)
			}
		}
		if len(at) > 1 {
			return pick(at)
		}
		g.live[at[0]].level++
	}
}

// smallestInput picks the k smallest of cands (ties: the older node).
func (g *greedy) smallestInput(cands []int) []int {
	c := slices.Clone(cands)
	slices.SortStableFunc(c, func(a, b int) int {
		return cmp.Or(cmp.Compare(g.live[a].set.Len(), g.live[b].set.Len()), cmp.Compare(g.live[a].id, g.live[b].id))
	})
	return c[:min(g.k, len(c))]
}

func (g *greedy) unionLen(a, b int) float64 {
	x, y := g.live[a].id, g.live[b].id
	key := [2]int{min(x, y), max(x, y)}
	if v, ok := g.unions[key]; ok {
		return v
	}
	v := g.live[a].set.Union(g.live[b].set).Len()
	g.unions[key] = v
	return v
}

// bestPair returns the pair of cands with the lowest score (ties: the first pair in id order).
func (g *greedy) bestPair(cands []int, score func(a, b int) float64) (int, int) {
	ba, bb, best := -1, -1, 0.0
	for i, a := range cands {
		for _, b := range cands[i+1:] {
			if s := score(a, b); ba < 0 || s < best {
				ba, bb, best = a, b, s
			}
		}
	}
	return ba, bb
}

// extend grows a chosen pair to k nodes, each time adding the candidate with the lowest score against
// the union chosen so far (the k-way generalisation; with k = 2 it does nothing).
func (g *greedy) extend(cands, chosen []int, score func(u Set, c int) float64) []int {
	if len(chosen) >= g.k || len(chosen) == len(cands) {
		return chosen
	}
	u := g.live[chosen[0]].set
	for _, c := range chosen[1:] {
		u = u.Union(g.live[c].set)
	}
	for len(chosen) < g.k && len(chosen) < len(cands) {
		best, bs := -1, 0.0
		for _, c := range cands {
			if slices.Contains(chosen, c) {
				continue
			}
			if s := score(u, c); best < 0 || s < bs {
				best, bs = c, s
			}
		}
		chosen = append(chosen, best)
		u = u.Union(g.live[best].set)
	}
	return chosen
}

// smallestOutput picks the pair of cands with the smallest union, then (k > 2) the runs that grow it
// least.
func (g *greedy) smallestOutput(cands []int) []int {
	a, b := g.bestPair(cands, g.unionLen)
	return g.extend(cands, []int{a, b}, func(u Set, c int) float64 { return u.Union(g.live[c].set).Len() })
}

// largestMatch picks the pair of cands that overlap most (ties: the smaller union), then (k > 2) the
// runs that overlap the chosen union most.
func (g *greedy) largestMatch(cands []int) []int {
	a, b := g.bestPair(cands, func(a, b int) float64 {
		u := g.unionLen(a, b)
		overlap := g.live[a].set.Len() + g.live[b].set.Len() - u
		// Overlap first; among equal overlaps the smaller union (scaled below one key).
		return -overlap + u/(1+u)
	})
	return g.extend(cands, []int{a, b}, func(u Set, c int) float64 {
		s := g.live[c].set
		return -(u.Len() + s.Len() - u.Union(s).Len())
	})
}
