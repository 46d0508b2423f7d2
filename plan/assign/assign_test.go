package assign

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Min against every injection of rows into columns on random square and rectangular matrices.
func TestMinIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 100 {
		rows := 1 + rng.IntN(6)
		cols := rows + rng.IntN(3)
		cost := make([][]float64, rows)
		for i := range cost {
			cost[i] = make([]float64, cols)
			for j := range cost[i] {
				cost[i][j] = float64(rng.IntN(20))
			}
		}
		to := Min(cost)
		seen := map[int]bool{}
		got := 0.0
		for i, j := range to {
			if seen[j] || j < 0 || j >= cols {
				t.Fatalf("trial %d: column %d given twice or out of range: %v", trial, j, to)
			}
			seen[j] = true
			got += cost[i][j]
		}
		if best := brute(cost); got != best {
			t.Fatalf("trial %d: %v costs %v, optimum %v", trial, to, got, best)
		}
	}
}

func brute(cost [][]float64) float64 {
	used := make([]bool, len(cost[0]))
	best := math.Inf(1)
	var walk func(i int, sum float64)
	walk = func(i int, sum float64) {
		if i == len(cost) {
			best = min(best, sum)
			return
		}
		for j := range used {
			if !used[j] {
				used[j] = true
				walk(i+1, sum+cost[i][j])
				used[j] = false
			}
		}
	}
	walk(0, 0)
	return best
}
