package replicaplan

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The thesis's running example (Figure 4.5): {6, 3, 2, 1} on 3 nodes takes 5 replicas at makespan 4.
func TestThesisExample(t *testing.T) {
	p, err := ModifiedBestFit([]Segment{{1, 6}, {2, 3}, {3, 2}, {4, 1}}, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Replicas() != 5 || p.Makespan() != 4 {
		t.Fatalf("replicas %d makespan %d (%v), want 5 and 4", p.Replicas(), p.Makespan(), p.Bins)
	}
	if Decay(10, 4) != 9 {
		t.Fatal("eq. 4.1: half the previous popularity plus the round's reads")
	}
}

// bruteMin is the fewest replicas of any assignment of the segments' reads to n nodes that keeps
// every node at most ⌈total/n⌉ (a load-balanced one).
func bruteMin(segs []Segment, n int) int {
	total := 0
	for _, s := range segs {
		total += s.Count
	}
	capacity := (total + n - 1) / n
	load := make([]int, n)
	best := math.MaxInt
	var place func(i, left, replicas, from int)
	place = func(i, left, replicas, from int) {
		if replicas >= best {
			return
		}
		if i == len(segs) {
			best = replicas
			return
		}
		if left == 0 {
			if i+1 < len(segs) {
				place(i+1, segs[i+1].Count, replicas, 0)
			} else {
				place(i+1, 0, replicas, 0)
			}
			return
		}
		for b := from; b < n; b++ { // this segment's next part goes to node b (nodes in order: no double counting)
			for take := 1; take <= min(left, capacity-load[b]); take++ {
				load[b] += take
				place(i, left-take, replicas+1, b+1)
				load[b] -= take
			}
		}
	}
	if len(segs) > 0 {
		place(0, segs[0].Count, 0, 0)
	} else {
		best = 0
	}
	return best
}

// ModifiedBestFit against the brute-force optimum on random small instances: its makespan is the
// optimal ⌈total/n⌉ and its replicas the fewest of any load-balanced assignment (Theorem 4.4).
func TestModifiedBestFitIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	worse := 0
	const trials = 300
	for trial := range trials {
		n := 2 + rng.IntN(3)
		var segs []Segment
		for i := range 2 + rng.IntN(4) {
			segs = append(segs, Segment{ID: uint64(i + 1), Count: 1 + rng.IntN(7)})
		}
		p, err := ModifiedBestFit(segs, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, s := range segs {
			total += s.Count
			if got := sumOf(p, s.ID); got != s.Count {
				t.Fatalf("trial %d: range %d placed %d reads of %d", trial, s.ID, got, s.Count)
			}
		}
		if p.Makespan() != (total+n-1)/n {
			t.Fatalf("trial %d %v on %d: makespan %d, optimum %d", trial, segs, n, p.Makespan(), (total+n-1)/n)
		}
		if opt := bruteMin(segs, n); p.Replicas() != opt {
			worse++
			t.Logf("trial %d %v on %d nodes: %d replicas, optimum %d (%v)", trial, segs, n, p.Replicas(), opt, p.Bins)
		}
	}
	if worse > 0 {
		t.Errorf("ModifiedBestFit used more replicas than the optimum on %d of %d instances", worse, trials)
	}
}

func sumOf(p Plan, id uint64) int {
	s := 0
	for _, b := range p.Bins {
		s += b[id]
	}
	return s
}

// On a skewed popularity (zipfian over 200 ranges, 10 nodes) ModifiedBestFit holds the optimal
// makespan; the proportional rule needs about as many replicas and misses it; uniform ×3 holds
// three times as many and misses it by far.
func TestAgainstBaselines(t *testing.T) {
	var segs []Segment
	for i := range 200 {
		segs = append(segs, Segment{ID: uint64(i + 1), Count: int(10000 / math.Pow(float64(i+1), 0.9))})
	}
	mbf, err := ModifiedBestFit(segs, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	uni, prop := Uniform(segs, 10, 3), Proportional(segs, 10)
	t.Logf("replicas / makespan: ModifiedBestFit %d / %d, uniform x3 %d / %d, proportional %d / %d",
		mbf.Replicas(), mbf.Makespan(), uni.Replicas(), uni.Makespan(), prop.Replicas(), prop.Makespan())
	total := 0
	for _, s := range segs {
		total += s.Count
	}
	if mbf.Makespan() != (total+9)/10 || prop.Makespan() <= mbf.Makespan() || uni.Makespan() <= mbf.Makespan() || uni.Replicas() < 2*mbf.Replicas() {
		t.Fatal("ModifiedBestFit should hold the optimal makespan, which the baselines miss, with at most half uniform's replicas")
	}
	// Capacity-aware: a node with twice the capacity takes about twice the reads.
	capd, err := ModifiedBestFit(segs, 3, []float64{2, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if l0, l1 := load(capd, 0), load(capd, 1); math.Abs(float64(l0)/float64(l1)-2) > 0.05 {
		t.Fatalf("capacity 2:1: loads %d and %d", l0, l1)
	}
}

func load(p Plan, b int) int {
	s := 0
	for _, c := range p.Bins[b] {
		s += c
	}
	return s
}

// A plan mapped onto nodes that already hold it (in another order) needs no new replica; a current
// layout of another size is refused.
func TestMapToNodes(t *testing.T) {
	p, _ := ModifiedBestFit([]Segment{{1, 6}, {2, 3}, {3, 2}, {4, 1}}, 3, nil)
	current := make([][]uint64, 3)
	for l, b := range p.Bins {
		for id := range b {
			current[(l+1)%3] = append(current[(l+1)%3], id)
		}
	}
	assign, created, err := MapToNodes(p, current)
	if err != nil || created != 0 || assign[0] != 1 || assign[1] != 2 || assign[2] != 0 {
		t.Fatalf("assignment %v with %d new replicas (%v), want a rotation and none", assign, created, err)
	}
	if _, _, err := MapToNodes(p, current[:2]); err == nil {
		t.Fatal("2 current nodes for 3 logical ones accepted")
	}
}
