package quorumrisk

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestWouldLoseMajority(t *testing.T) {
	for _, tc := range []struct {
		voters, busy int
		want         bool
	}{
		{1, 0, false}, {2, 1, false}, {3, 0, false}, {3, 1, true}, {5, 1, false}, {5, 2, true}, {4, 1, true}, {7, 2, false}, {7, 3, true},
	} {
		if got := WouldLoseMajority(tc.voters, tc.busy); got != tc.want {
			t.Errorf("WouldLoseMajority(%d voters, %d busy) = %v, want %v", tc.voters, tc.busy, got, tc.want)
		}
	}
}

// RangeRisk against hand counts and against a Monte Carlo count of random busy sets.
func TestRangeRisk(t *testing.T) {
	// 8 nodes, 3 voters: two busy nodes take a majority only when both are voters: C(3,2)/C(8,2).
	if got := RangeRisk(8, 3, 2); math.Abs(got-3.0/28) > 1e-12 {
		t.Fatalf("RangeRisk(8,3,2) = %v, want 3/28", got)
	}
	if RangeRisk(8, 3, 1) != 0 || RangeRisk(8, 3, 7) != 1 {
		t.Fatalf("one busy node never, seven always: %v %v", RangeRisk(8, 3, 1), RangeRisk(8, 3, 7))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ n, r, h int }{{8, 3, 2}, {8, 3, 4}, {5, 3, 2}, {12, 5, 4}, {10, 4, 3}, {30, 3, 6}} {
		const trials = 100_000
		hits := 0
		for range trials {
			busy := rng.Perm(tc.n)[:tc.h]
			c := 0
			for _, b := range busy {
				if b < tc.r { // the range's voters are nodes 0..r-1
					c++
				}
			}
			if c >= Blocking(tc.r) {
				hits++
			}
		}
		mc, got := float64(hits)/trials, RangeRisk(tc.n, tc.r, tc.h)
		t.Logf("n=%d r=%d h=%d: formula %.4f, Monte Carlo %.4f", tc.n, tc.r, tc.h, got, mc)
		if math.Abs(mc-got) > 0.02 {
			t.Errorf("n=%d r=%d h=%d: formula %.4f, Monte Carlo %.4f: more than 2 points apart", tc.n, tc.r, tc.h, got, mc)
		}
	}
}

// placement puts ranges of 3 voters on random distinct nodes among n.
func placement(rng *rand.Rand, n, ranges int) ([]uint64, [][]uint64) {
	nodes := make([]uint64, n)
	for i := range nodes {
		nodes[i] = uint64(i + 1)
	}
	var rs [][]uint64
	for range ranges {
		p := rng.Perm(n)[:3]
		rs = append(rs, []uint64{uint64(p[0] + 1), uint64(p[1] + 1), uint64(p[2] + 1)})
	}
	return nodes, rs
}

// ClusterRisk over a real placement: one range gives RangeRisk; many ranges on 8 nodes make two
// simultaneous busy nodes almost sure to take some range's majority (the thesis saw 21 of 30 runs
// hurt with two hot spots); the enumerated and the sampled figures agree with a Monte Carlo count.
func TestClusterRisk(t *testing.T) {
	nodes, one := placement(rand.New(rand.NewPCG(5, 6)), 8, 1)
	if p, exact := ClusterRisk(nodes, 2, one); !exact || math.Abs(p-RangeRisk(8, 3, 2)) > 1e-12 {
		t.Fatalf("one range: %v (exact %v), want %v", p, exact, RangeRisk(8, 3, 2))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ n, ranges, h int }{{8, 4, 2}, {8, 20, 2}, {8, 20, 3}, {40, 200, 6}} {
		nodes, rs := placement(rng, tc.n, tc.ranges)
		p, exact := ClusterRisk(nodes, tc.h, rs)
		const trials = 50_000
		hits := 0
		for range trials {
			busy := map[uint64]bool{}
			for _, i := range rng.Perm(tc.n)[:tc.h] {
				busy[uint64(i+1)] = true
			}
			for _, r := range rs {
				c := 0
				for _, id := range r {
					if busy[id] {
						c++
					}
				}
				if c >= 2 {
					hits++
					break
				}
			}
		}
		mc := float64(hits) / trials
		t.Logf("%d nodes, %d ranges, %d busy: risk %.4f (exact %v), Monte Carlo %.4f", tc.n, tc.ranges, tc.h, p, exact, mc)
		if math.Abs(mc-p) > 0.02 {
			t.Errorf("%d nodes, %d ranges, %d busy: risk %.4f, Monte Carlo %.4f", tc.n, tc.ranges, tc.h, p, mc)
		}
	}
}
