// Package quorumrisk computes how likely concurrent busy nodes (hot spots, background tasks,
// maintenance) are to take a majority of some range's voters at once, when a range can make no
// progress or only slowly: the hypergeometric risk of Bekas's simultaneous hot spots (thesis eq.
// 3.2–3.5), for one range and for a cluster's actual placement, and the rule a task that is about to
// make its node busy must pass.
//
// It is a leaf: it sees placements as lists of node ids and never reads a cluster or starts a task.
package quorumrisk

import (
	"math"
	"math/big"
	"math/rand/v2"
)

// Majority is the number of voters a range of n voters needs to make progress.
func Majority(n int) int { return n/2 + 1 }

// Blocking is how many of a range's n voters must be busy or down for the rest to be fewer than a
// majority: then every write waits on a busy voter. For an odd n it is a majority itself.
func Blocking(n int) int { return n - Majority(n) + 1 }

// WouldLoseMajority reports whether making one more of a range's voters busy leaves fewer than a
// majority of its voters free: busyOthers voters other than the one about to become busy are
// already busy or down. Ranges of one or two voters have no voter to spare at all, so only ranges of
// three or more count.
func WouldLoseMajority(voters, busyOthers int) bool {
	return voters >= 3 && busyOthers+1 >= Blocking(voters)
}

// RangeRisk is the probability that h busy nodes, chosen uniformly among n, leave fewer than a
// majority of one range's r voters (each on its own node) free: the hypergeometric tail
//
//	P = Σ_{i=b}^{min(r,h)} C(r,i)·C(n−r,h−i) / C(n,h),  b = Blocking(r) (a majority for odd r)
//
// (thesis eq. 3.4, whose printed sum has C(r,m) where the hypergeometric term is C(r,i)).
func RangeRisk(n, r, h int) float64 {
	if n <= 0 || r <= 0 || r > n || h < 0 || h > n {
		return math.NaN()
	}
	num := new(big.Int)
	for i := Blocking(r); i <= min(r, h); i++ {
		num.Add(num, new(big.Int).Mul(binom(r, i), binom(n-r, h-i)))
	}
	f, _ := new(big.Rat).SetFrac(num, binom(n, h)).Float64()
	return f
}

func binom(n, k int) *big.Int {
	if k < 0 || k > n {
		return new(big.Int)
	}
	return new(big.Int).Binomial(int64(n), int64(k))
}

// exactLimit bounds the busy sets ClusterRisk enumerates; beyond it, it samples.
const exactLimit = 200_000

// samples is how many busy sets ClusterRisk draws when it cannot enumerate them: its estimate is
// then within about ±0.3 points (95 %).
const samples = 100_000

// ClusterRisk is the probability that h busy nodes, chosen uniformly among nodes, leave fewer than
// a majority of the voters of at least one range free (ranges lists each range's voters by node id): the
// union of eq. 3.4's events over the actual placement (eq. 3.5). It enumerates the busy sets when
// there are at most exactLimit of them, and otherwise estimates from seeded samples. exact says
// which.
func ClusterRisk(nodes []uint64, h int, ranges [][]uint64) (p float64, exact bool) {
	n := len(nodes)
	if h < 0 || h > n || n == 0 {
		return math.NaN(), true
	}
	index := map[uint64]int{}
	for i, id := range nodes {
		index[id] = i
	}
	// Each range of three or more voters as its voters' positions among nodes and how many of them
	// busy block it (a voter on a node not in nodes is never busy).
	type voters struct {
		at   []int
		need int
	}
	var sets []voters
	for _, r := range ranges {
		if len(r) < 3 {
			continue
		}
		v := voters{need: Blocking(len(r))}
		for _, id := range r {
			if i, ok := index[id]; ok {
				v.at = append(v.at, i)
			}
		}
		sets = append(sets, v)
	}
	hit := func(busy []bool) bool {
		for _, v := range sets {
			c := 0
			for _, i := range v.at {
				if busy[i] {
					c++
				}
			}
			if c >= v.need {
				return true
			}
		}
		return false
	}
	busy := make([]bool, n)
	if total := binom(n, h); total.IsInt64() && total.Int64() <= exactLimit {
		hits, all := 0, 0
		var walk func(from, left int)
		walk = func(from, left int) {
			if left == 0 {
				all++
				if hit(busy) {
					hits++
				}
				return
			}
			for i := from; i <= n-left; i++ {
				busy[i] = true
				walk(i+1, left-1)
				busy[i] = false
			}
		}
		walk(0, h)
		return float64(hits) / float64(all), true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	perm := make([]int, n)
	hits := 0
	for range samples {
		for i := range perm {
			perm[i] = i
		}
		for i := 0; i < h; i++ { // a partial Fisher–Yates shuffle: the first h are the busy set
			j := i + rng.IntN(n-i)
			perm[i], perm[j] = perm[j], perm[i]
			busy[perm[i]] = true
		}
		if hit(busy) {
			hits++
		}
		for i := 0; i < h; i++ {
			busy[perm[i]] = false
		}
	}
	return float64(hits) / samples, false
}
