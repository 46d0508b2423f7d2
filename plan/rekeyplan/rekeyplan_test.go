package rekeyplan

import (
	"math"
	"math/rand/v2"
	"testing"
)

func randomInput(rng *rand.Rand, m, n int) Input {
	in := Input{Local: make([][]float64, m), Size: make([]float64, m)}
	for i := range m {
		in.Local[i] = make([]float64, n)
		for j := range n {
			if rng.IntN(3) > 0 {
				in.Local[i][j] = float64(rng.IntN(100))
			}
			in.Size[i] += in.Local[i][j]
		}
	}
	return in
}

// bruteMoved is the fewest bytes moved over every placement that puts at most limit ranges on a
// server (limit ≥ m: no cap).
func bruteMoved(in Input, limit int) float64 {
	m, n := len(in.Local), len(in.Local[0])
	count := make([]int, n)
	best := math.Inf(1)
	var walk func(i int, moved float64)
	walk = func(i int, moved float64) {
		if i == m {
			best = min(best, moved)
			return
		}
		for j := range n {
			if count[j] < limit {
				count[j]++
				walk(i+1, moved+in.Size[i]-in.Local[i][j])
				count[j]--
			}
		}
	}
	walk(0, 0)
	return best
}

// Lemma 2.1 and 2.2 on random small instances: Greedy moves the fewest bytes of any placement,
// Balanced the fewest of any placement with at most ⌈m/N⌉ ranges a server, and keeps that cap.
func TestPlacementsAreOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		m, n := 2+rng.IntN(5), 2+rng.IntN(2)
		in := randomInput(rng, m, n)
		g, err := Greedy(in)
		if err != nil {
			t.Fatal(err)
		}
		if got, opt := in.Moved(g), bruteMoved(in, m); got != opt {
			t.Fatalf("trial %d: greedy moves %v, optimum %v", trial, got, opt)
		}
		b, err := Balanced(in)
		if err != nil {
			t.Fatal(err)
		}
		limit := (m + n - 1) / n
		per := make([]int, n)
		for _, j := range b {
			per[j]++
			if per[j] > limit {
				t.Fatalf("trial %d: %d ranges on server %d, cap %d", trial, per[j], j, limit)
			}
		}
		if got, opt := in.Moved(b), bruteMoved(in, limit); got != opt {
			t.Fatalf("trial %d: balanced moves %v, optimum under the cap %v", trial, got, opt)
		}
	}
}

// On data that sits mostly on one server (the thesis's unbalanced case, Fig. 2.2b), Greedy piles the
// new ranges there and Balanced spreads them at a small cost in bytes; a random balanced placement
// moves several times more than Balanced on a larger instance (the thesis's Fig. 2.7: random is 5×
// slower).
func TestGreedyPilesBalancedSpreads(t *testing.T) {
	in := Input{Local: [][]float64{{90, 5, 5}, {80, 10, 10}, {70, 20, 10}}, Size: []float64{100, 100, 100}}
	g, _ := Greedy(in)
	b, _ := Balanced(in)
	if g[0] != 0 || g[1] != 0 || g[2] != 0 {
		t.Fatalf("greedy %v: want every range on server 0", g)
	}
	if b[0] == b[1] || b[1] == b[2] || b[0] == b[2] {
		t.Fatalf("balanced %v: want one range a server", b)
	}
	t.Logf("greedy moves %v, balanced %v", in.Moved(g), in.Moved(b))

	rng := rand.New(rand.NewPCG(3, 4))
	big := Input{Local: make([][]float64, 30), Size: make([]float64, 30)}
	for i := range big.Local { // each new range mostly on one server: what a re-key of correlated keys leaves
		big.Local[i] = make([]float64, 10)
		home := rng.IntN(10)
		for j := range big.Local[i] {
			big.Local[i][j] = float64(rng.IntN(10))
		}
		big.Local[i][home] += 200
		for _, v := range big.Local[i] {
			big.Size[i] += v
		}
	}
	bal, _ := Balanced(big)
	random, err := Random(big, 7)
	if err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for _, j := range random {
		per[j]++
	}
	for j, k := range per {
		if k > 3 {
			t.Fatalf("random put %d ranges on server %d, over the cap of 3", k, j)
		}
	}
	t.Logf("30 ranges on 10 servers: balanced moves %.0f, a random balanced placement %.0f (%.1fx)", big.Moved(bal), big.Moved(random), big.Moved(random)/big.Moved(bal))
	if big.Moved(random) < 2*big.Moved(bal) {
		t.Fatalf("random %v, balanced %v: want random at least twice", big.Moved(random), big.Moved(bal))
	}
}

// Weighted fair sharing: a destination's streams follow its share of the data, and its sources split
// them by data × latency.
func TestStreams(t *testing.T) {
	data := [][]float64{{0, 300, 100}, {100, 0, 100}, {300, 0, 0}}
	lat := [][]float64{{0, 1, 2}, {1, 0, 1}, {2, 1, 0}}
	s := Streams(data, lat, 30)
	sum := 0
	for i := range s {
		for j := range s[i] {
			sum += s[i][j]
			if data[i][j] == 0 && s[i][j] != 0 {
				t.Fatalf("streams %v: a pair with no data got some", s)
			}
		}
	}
	if sum != 30 {
		t.Fatalf("streams %v: %d in all, want 30", s, sum)
	}
	// Destination 0 receives 400 of 900 bytes: 13 streams; from 2 (300 B × 2 ms) vs from 1 (100 × 1): 6:1.
	if s[2][0]+s[1][0] != 13 || s[2][0] != 11 {
		t.Fatalf("destination 0's streams %d from n2 and %d from n1, want 11 and 2", s[2][0], s[1][0])
	}
}
