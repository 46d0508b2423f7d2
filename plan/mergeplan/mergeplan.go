// Package mergeplan plans the order in which sorted runs (backup layers, sstables) are merged into one:
// a merge tree whose cost is the keys it reads and writes. It implements the greedy heuristics of
// Ghosh's thesis (2018), chapter 5 — BalanceTree ordered by input or by output, SmallestInput,
// SmallestOutput (with HyperLogLog estimates when runs are sketched), LargestMatch — beside Random,
// the cost Σ|A_ν| of a plan, the lower bound Σ|A_i| and, for small instances, the exact optimum.
//
// It is a leaf solver: it sees key sets or sketches only, never files, engines or a cluster, and it
// never merges data itself — callers carry out the plan.
package mergeplan

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Strategy names a heuristic.
type Strategy int

const (
	// BalanceTreeInput merges level by level (a tree of height ⌈log_k n⌉), pairing the smallest runs of
	// a level first: the thesis's BT(I), a (⌈log n⌉+1)-approximation and its choice in practice.
	BalanceTreeInput Strategy = iota
	// BalanceTreeOutput is BalanceTree pairing by smallest union within a level: BT(O).
	BalanceTreeOutput
	// SmallestInput merges the k smallest runs: a (2H_n+1)-approximation, optimal on disjoint runs.
	SmallestInput
	// SmallestOutput merges the k runs whose union is smallest: same bounds as SmallestInput.
	SmallestOutput
	// LargestMatch merges the runs that overlap most; it can be Ω(n) from the optimum.
	LargestMatch
	// Random merges k runs drawn at random: the baseline of no strategy.
	Random
	// Optimum is the exact binary optimum by exhaustive search (Optimal): up to MaxOptimalRuns runs.
	Optimum
)

// Strategies lists every strategy, in the order reports print them.
var Strategies = []Strategy{BalanceTreeInput, BalanceTreeOutput, SmallestInput, SmallestOutput, LargestMatch, Random}

var names = map[Strategy]string{
	BalanceTreeInput: "balance-tree-input", BalanceTreeOutput: "balance-tree-output", SmallestInput: "smallest-input",
	SmallestOutput: "smallest-output", LargestMatch: "largest-match", Random: "random", Optimum: "optimum",
}

func (s Strategy) String() string {
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// ParseStrategy is the inverse of String.
func ParseStrategy(name string) (Strategy, error) {
	for s, n := range names {
		if n == name {
			return s, nil
		}
	}
	all := make([]string, 0, len(Strategies))
	for _, s := range Strategies {
		all = append(all, s.String())
	}
	return 0, fmt.Errorf("mergeplan: unknown strategy %q (one of %s)", name, strings.Join(all, ", "))
}

// Options tune Make.
type Options struct {
	// Fanin is the most runs one merge reads (k of the thesis's K-WayMerging); 0 means 2.
	Fanin int
	// Seed drives Random.
	Seed uint64
}

// Merge is one step of a plan: it reads Inputs (node ids) and writes a new node.
type Merge struct {
	Inputs []int
}

// Plan is a merge schedule. Node ids 0..Runs-1 are the input runs; Runs+j is the output of Merges[j].
// Merges are in an order they can run in (every input exists before the merge that reads it), and the
// last one writes the root. A plan of one run has no merges.
type Plan struct {
	Strategy Strategy
	Runs     int
	Merges   []Merge
}

// Root is the id of the node holding every key.
func (p Plan) Root() int { return p.Runs + len(p.Merges) - 1 }

// Validate checks that p merges runs 0..p.Runs-1 into one node, reading every node exactly once.
func (p Plan) Validate(fanin int) error {
	if fanin < 2 {
		fanin = 2
	}
	read := make([]bool, p.Runs+len(p.Merges))
	for j, m := range p.Merges {
		if len(m.Inputs) < 2 || len(m.Inputs) > fanin {
			return fmt.Errorf("mergeplan: merge %d reads %d nodes (want 2..%d)", j, len(m.Inputs), fanin)
		}
		for _, in := range m.Inputs {
			if in < 0 || in >= p.Runs+j {
				return fmt.Errorf("mergeplan: merge %d reads node %d before it exists", j, in)
			}
			if read[in] {
				return fmt.Errorf("mergeplan: node %d is read twice", in)
			}
			read[in] = true
		}
	}
	for id := 0; id < p.Root(); id++ {
		if !read[id] {
			return fmt.Errorf("mergeplan: node %d is never merged", id)
		}
	}
	return nil
}

// Cost is Σ|A_ν| over every node of p's tree (the thesis's equation 5.2), evaluated on sets — exact
// KeySets give the true cost whatever the plan was made from. It is also the sets of every node, in id
// order, so a caller can report each merge's output.
func Cost(p Plan, sets []Set) (float64, []Set) {
	nodes := append(make([]Set, 0, p.Runs+len(p.Merges)), sets...)
	total := 0.0
	for _, s := range sets {
		total += s.Len()
	}
	for _, m := range p.Merges {
		u := nodes[m.Inputs[0]]
		for _, in := range m.Inputs[1:] {
			u = u.Union(nodes[in])
		}
		nodes = append(nodes, u)
		total += u.Len()
	}
	return total, nodes
}

// IO is the keys a plan reads and writes (the thesis's cost_actual, equation 5.1): every leaf read
// once, every intermediate node written and read, the root written once.
func IO(p Plan, sets []Set) float64 {
	c, nodes := Cost(p, sets)
	if len(p.Merges) == 0 {
		return c
	}
	return 2*c - LowerBound(sets) - nodes[p.Root()].Len()
}

// LowerBound is Σ|A_i|, the thesis's bound on the optimum (every run is a node of every tree).
func LowerBound(sets []Set) float64 {
	lb := 0.0
	for _, s := range sets {
		lb += s.Len()
	}
	return lb
}

// RootBound adds the root to LowerBound: with two runs or more the root is a node apart from the
// leaves, so Σ|A_i| + |∪A_i| is also a bound, and the one a single k-way merge of all runs meets.
func RootBound(sets []Set) float64 {
	if len(sets) < 2 {
		return LowerBound(sets)
	}
	u := sets[0]
	for _, s := range sets[1:] {
		u = u.Union(s)
	}
	return LowerBound(sets) + u.Len()
}

// Make plans the merge of sets with strategy s. All sets must be of one kind.
func Make(sets []Set, s Strategy, opt Options) (Plan, error) {
	if len(sets) == 0 {
		return Plan{}, fmt.Errorf("mergeplan: nothing to merge")
	}
	for i, x := range sets {
		if fmt.Sprintf("%T", x) != fmt.Sprintf("%T", sets[0]) {
			return Plan{}, fmt.Errorf("mergeplan: run %d is a %T, run 0 a %T: one kind per plan", i, x, sets[0])
		}
	}
	k := opt.Fanin
	if k == 0 {
		k = 2
	}
	if k < 2 {
		return Plan{}, fmt.Errorf("mergeplan: fan-in %d: a merge reads at least 2 runs", k)
	}
	g := &greedy{k: k, plan: Plan{Strategy: s, Runs: len(sets)}, unions: map[[2]int]float64{}}
	for i, x := range sets {
		g.live = append(g.live, &node{id: i, set: x, level: 1})
	}
	if s == Optimum {
		if k != 2 {
			return Plan{}, fmt.Errorf("mergeplan: the optimum is searched for binary merges only")
		}
		p, _, err := Optimal(sets)
		p.Strategy = Optimum
		return p, err
	}
	var choose func() []int
	switch s {
	case BalanceTreeInput:
		choose = func() []int { return g.balanced(g.smallestInput) }
	case BalanceTreeOutput:
		choose = func() []int { return g.balanced(g.smallestOutput) }
	case SmallestInput:
		choose = func() []int { return g.smallestInput(g.all()) }
	case SmallestOutput:
		choose = func() []int { return g.smallestOutput(g.all()) }
	case LargestMatch:
		choose = func() []int { return g.largestMatch(g.all()) }
	case Random:
		rng := rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15))
		choose = func() []int {
			idx := rng.Perm(len(g.live))
			return idx[:min(k, len(idx))]
		}
	default:
		return Plan{}, fmt.Errorf("mergeplan: unknown strategy %d", int(s))
	}
	for len(g.live) > 1 {
		g.merge(choose())
	}
	return g.plan, nil
}
