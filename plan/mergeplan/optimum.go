package mergeplan

import (
	"fmt"
	"math/bits"
)

// MaxOptimalRuns bounds Optimal: its search is 3^n subset pairs.
const MaxOptimalRuns = 14

// Optimal is the cheapest binary merge tree, by exhaustive search over the ways to split every subset
// of runs in two (BinaryMerging is NP-hard, so this is for small instances: tests and checking the
// heuristics' ratios). The cost of a tree over a subset S is |∪S| plus the cost of its two subtrees.
func Optimal(sets []Set) (Plan, float64, error) {
	n := len(sets)
	if n == 0 || n > MaxOptimalRuns {
		return Plan{}, 0, fmt.Errorf("mergeplan: optimum of %d runs (1..%d)", n, MaxOptimalRuns)
	}
	full := 1<<n - 1
	unions := make([]Set, full+1)
	best := make([]float64, full+1)
	split := make([]int, full+1)
	for mask := 1; mask <= full; mask++ {
		low := bits.TrailingZeros(uint(mask))
		rest := mask &^ (1 << low)
		if rest == 0 {
			unions[mask] = sets[low]
			best[mask] = sets[low].Len()
			continue
		}
		unions[mask] = unions[rest].Union(sets[low])
		// Subsets holding the lowest run name each split once.
		bestCost, bestSub := -1.0, 0
		for sub := rest; ; sub = (sub - 1) & rest {
			left := sub | 1<<low
			if left != mask {
				if c := best[left] + best[mask^left]; bestCost < 0 || c < bestCost {
					bestCost, bestSub = c, left
				}
			}
			if sub == 0 {
				break
			}
		}
		best[mask] = unions[mask].Len() + bestCost
		split[mask] = bestSub
	}
	p := Plan{Runs: n}
	var build func(mask int) int
	build = func(mask int) int {
		if mask&(mask-1) == 0 {
			return bits.TrailingZeros(uint(mask))
		}
		l := build(split[mask])
		r := build(mask ^ split[mask])
		p.Merges = append(p.Merges, Merge{Inputs: []int{l, r}})
		return n + len(p.Merges) - 1
	}
	build(full)
	return p, best[full], nil
}
