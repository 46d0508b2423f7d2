// Package assign solves the assignment problem: each row (a chunk, a logical node) to a distinct
// column (a server slot, a physical node) at the least total cost, by the Hungarian algorithm. The
// placement planners share it.
//
// It is a leaf: it sees only a cost matrix.
package assign

import (
	"fmt"
	"math"
	"slices"
)

// Min is the minimum-cost assignment of rows to distinct columns of cost (rows ≤ columns; a square
// matrix gives a perfect matching): the Hungarian algorithm (Kuhn–Munkres with potentials, O(n²m)).
// It returns each row's column.
func Min(cost [][]float64) []int {
	if len(cost) == 0 {
		return nil
	}
	if len(cost) > len(cost[0]) {
		panic(fmt.Sprintf("assign: %d rows for %d columns", len(cost), len(cost[0])))
	}
	return hungarian(square(cost))[:len(cost)]
}

// square pads cost with zero rows to a square matrix: the padding rows take the columns left over.
func square(cost [][]float64) [][]float64 {
	m := len(cost[0])
	out := slices.Clone(cost)
	for len(out) < m {
		out = append(out, make([]float64, m))
	}
	return out
}

func hungarian(cost [][]float64) []int {
	n := len(cost)
	u, v := make([]float64, n+1), make([]float64, n+1)
	match, way := make([]int, n+1), make([]int, n+1) // match[col] = row, 1-based; 0: free
	for i := 1; i <= n; i++ {
		match[0] = i
		j0 := 0
		minv := make([]float64, n+1)
		used := make([]bool, n+1)
		for j := range minv {
			minv[j] = math.Inf(1)
		}
		for match[j0] != 0 {
			used[j0] = true
			i0, delta, j1 := match[j0], math.Inf(1), 0
			for j := 1; j <= n; j++ {
				if used[j] {
					continue
				}
				if cur := cost[i0-1][j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j], way[j] = cur, j0
				}
				if minv[j] < delta {
					delta, j1 = minv[j], j
				}
			}
			for j := 0; j <= n; j++ {
				if used[j] {
					u[match[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
		}
		for j0 != 0 {
			j1 := way[j0]
			match[j0] = match[j1]
			j0 = j1
		}
	}
	out := make([]int, n)
	for j := 1; j <= n; j++ {
		if match[j] > 0 {
			out[match[j]-1] = j - 1
		}
	}
	return out
}
