// Package rekeyplan places the ranges of a table's new keyspace when its key changes, so that the
// fewest bytes cross the network, and shares the network among the transfers that remain: Ghosh's
// Morphus (thesis chapter 2). Each new range holds data now spread over the servers' old ranges;
// Greedy puts every new range on the server that already holds most of its data (optimal in bytes
// moved, Lemma 2.1, but it can pile ranges on a few servers); Balanced caps every server at ⌈m/N⌉
// new ranges and finds the cheapest placement under the cap by bipartite matching (Lemma 2.2).
// Streams gives each transfer its share of K concurrent streams by weighted fair sharing: data size
// times link latency (eq. 2.1).
//
// It is a leaf: ranges and servers are indexes into matrices of bytes. It never reads or moves data;
// the re-key's coordinator turns its plan into operators.
package rekeyplan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/shoaldb/shoal/plan/assign"
)

// Input is a re-key's placement problem: Local[i][j] is the bytes of new range i already on server
// j, Size[i] new range i's bytes.
type Input struct {
	Local [][]float64
	Size  []float64
}

func (in Input) check() (m, n int, err error) {
	m = len(in.Local)
	if m == 0 {
		return 0, 0, nil
	}
	n = len(in.Local[0])
	if len(in.Size) != m || n == 0 {
		return 0, 0, fmt.Errorf("rekeyplan: %d sizes for %d ranges on %d servers", len(in.Size), m, n)
	}
	for i, row := range in.Local {
		if len(row) != n {
			return 0, 0, fmt.Errorf("rekeyplan: range %d has %d servers, want %d", i, len(row), n)
		}
	}
	return m, n, nil
}

// Moved is the bytes a placement (range i on server to[i]) moves.
func (in Input) Moved(to []int) float64 {
	s := 0.0
	for i, j := range to {
		s += in.Size[i] - in.Local[i][j]
	}
	return s
}

// Greedy puts each new range on the server holding most of its data (ties: the lower server).
func Greedy(in Input) ([]int, error) {
	if _, _, err := in.check(); err != nil {
		return nil, err
	}
	to := make([]int, len(in.Local))
	for i, row := range in.Local {
		for j, b := range row {
			if b > row[to[i]] {
				to[i] = j
			}
		}
	}
	return to, nil
}

// Balanced places at most ⌈m/N⌉ new ranges on each server, moving the fewest bytes among such
// placements: each server becomes ⌈m/N⌉ slots and the ranges are matched to slots by the Hungarian
// algorithm on the bytes each choice moves.
func Balanced(in Input) ([]int, error) {
	m, n, err := in.check()
	if err != nil || m == 0 {
		return nil, err
	}
	slots := (m + n - 1) / n
	cost := make([][]float64, m)
	for i := range cost {
		cost[i] = make([]float64, n*slots)
		for j := range n {
			for k := range slots {
				cost[i][j*slots+k] = in.Size[i] - in.Local[i][j]
			}
		}
	}
	to := assign.Min(cost)
	for i := range to {
		to[i] /= slots
	}
	return to, nil
}

// Random places at most ⌈m/N⌉ new ranges on each server at random (the thesis's baseline, Fig.
// 2.7): the ranges dealt into a shuffled list of the servers' slots. The same seed gives the same
// placement.
func Random(in Input, seed uint64) ([]int, error) {
	m, n, err := in.check()
	if err != nil || m == 0 {
		return nil, err
	}
	slots := (m + n - 1) / n
	all := make([]int, 0, n*slots)
	for j := range n {
		for range slots {
			all = append(all, j)
		}
	}
	rand.New(rand.NewPCG(seed, uint64(m))).Shuffle(len(all), func(a, b int) { all[a], all[b] = all[b], all[a] })
	return all[:m], nil
}

// Streams shares k concurrent streams among the transfers (eq. 2.1 and the socket split after it):
// data[i][j] bytes from server i to server j over a path of latency[i][j]. Destination j gets
// k·Σ_i data[i][j] / Σ data streams, and splits them among its sources in proportion to
// data[i][j]·latency[i][j]; counts are rounded by largest remainder, and a transfer with data gets at
// least one stream. It returns streams[i][j].
func Streams(data, latency [][]float64, k int) [][]int {
	n := len(data)
	out := make([][]int, n)
	for i := range out {
		out[i] = make([]int, n)
	}
	total := 0.0
	for i := range data {
		for j := range data[i] {
			total += data[i][j]
		}
	}
	if total == 0 || k <= 0 {
		return out
	}
	perDest := make([]float64, n)
	for j := range n {
		for i := range n {
			perDest[j] += data[i][j]
		}
		perDest[j] = float64(k) * perDest[j] / total
	}
	for j, kj := range largestRemainder(perDest, k) {
		w := make([]float64, n)
		sum := 0.0
		for i := range n {
			w[i] = data[i][j] * latency[i][j]
			sum += w[i]
		}
		if sum == 0 {
			continue
		}
		for i := range w {
			w[i] = float64(kj) * w[i] / sum
		}
		for i, c := range largestRemainder(w, kj) {
			if data[i][j] > 0 {
				c = max(c, 1)
			}
			out[i][j] = c
		}
	}
	return out
}

// largestRemainder rounds shares that sum to total to integers that do too.
func largestRemainder(shares []float64, total int) []int {
	out := make([]int, len(shares))
	given := 0
	idx := make([]int, len(shares))
	for i, s := range shares {
		out[i] = int(math.Floor(s))
		given += out[i]
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ra, rb := shares[a]-math.Floor(shares[a]), shares[b]-math.Floor(shares[b])
		switch {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return 0
	})
	for k := 0; given < total && k < len(idx); k++ {
		out[idx[k]]++
		given++
	}
	return out
}
