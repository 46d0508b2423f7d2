package mergeplan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func set(keys ...uint64) Set { return Keys(keys...) }

func span(lo, hi uint64) Set {
	s := make([]uint64, 0, hi-lo+1)
	for k := lo; k <= hi; k++ {
		s = append(s, k)
	}
	return KeySet(s)
}

func mustCost(t *testing.T, sets []Set, s Strategy, opt Options) float64 {
	t.Helper()
	p, err := Make(sets, s, opt)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if err := p.Validate(opt.Fanin); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	c, _ := Cost(p, sets)
	return c
}

// The thesis's Working Example 5.1 and the costs of its Figures 5.4 (SmallestInput, 47) and 5.5
// (SmallestOutput, 40). Figure 5.3's BalanceTree pairs the sets in index order (45); BT(I) pairs the
// smallest first and BT(O) the smallest unions first.
func TestWorkingExample(t *testing.T) {
	sets := []Set{set(1, 2, 3, 5), set(1, 2, 3, 4), set(3, 4, 5), set(6, 7, 8), set(7, 8, 9)}
	for _, tc := range []struct {
		s    Strategy
		want float64
	}{
		{SmallestInput, 47}, {SmallestOutput, 40}, {BalanceTreeInput, 47}, {BalanceTreeOutput, 40}, {Optimum, 40},
	} {
		if got := mustCost(t, sets, tc.s, Options{}); got != tc.want {
			t.Errorf("%s: cost %v, want %v", tc.s, got, tc.want)
		}
	}
	if lb := LowerBound(sets); lb != 17 {
		t.Errorf("lower bound %v, want 17", lb)
	}
}

// Lemma 5.3: n−1 copies of {1} and {1..n}. The left-to-right merge costs 4n−3; BalanceTree carries
// the big set through every level, ≥ n(log n + 1): its log factor is tight.
func TestBalanceTreeLogFactor(t *testing.T) {
	prev := 0.0
	for _, n := range []int{8, 16, 64, 256} {
		sets := make([]Set, 0, n)
		for range n - 1 {
			sets = append(sets, set(1))
		}
		sets = append(sets, span(1, uint64(n)))
		opt := float64(4*n - 3)
		if n <= MaxOptimalRuns {
			if _, c, err := Optimal(sets); err != nil || c != opt {
				t.Fatalf("n=%d: optimum %v (%v), want %v", n, c, err, opt)
			}
		}
		if si := mustCost(t, sets, SmallestInput, Options{}); si != opt {
			t.Errorf("n=%d: SmallestInput %v, want the optimum %v", n, si, opt)
		}
		bt := mustCost(t, sets, BalanceTreeInput, Options{})
		logn := math.Log2(float64(n))
		if bt < float64(n)*(logn+1) {
			t.Errorf("n=%d: BalanceTree %v < n(log n+1) = %v", n, bt, float64(n)*(logn+1))
		}
		if bt > (logn+1)*opt {
			t.Errorf("n=%d: BalanceTree %v above its bound (⌈log n⌉+1)·OPT = %v", n, bt, (logn+1)*opt)
		}
		ratio := bt / opt
		if ratio <= prev {
			t.Errorf("n=%d: BalanceTree's ratio %.2f did not grow (was %.2f)", n, ratio, prev)
		}
		prev = ratio
		t.Logf("n=%d: BalanceTree %v, optimum %v, ratio %.2f", n, bt, opt, ratio)
	}
}

// Section 5.3.3: A_i = {1..2^(i−1)}. The optimum is the left-to-right merge, 2^(n+1)−3; LargestMatch
// keeps the largest set in every merge, 2^n−1 + (n−1)·2^(n−1): Ω(n) from the optimum.
func TestLargestMatchLinear(t *testing.T) {
	for _, n := range []int{4, 8, 12, 16} {
		sets := make([]Set, n)
		for i := range n {
			sets[i] = span(1, 1<<i)
		}
		opt := math.Ldexp(1, n+1) - 3
		if n <= 10 {
			if _, c, err := Optimal(sets); err != nil || c != opt {
				t.Fatalf("n=%d: optimum %v (%v), want %v", n, c, err, opt)
			}
		}
		if si := mustCost(t, sets, SmallestInput, Options{}); si != opt {
			t.Errorf("n=%d: SmallestInput %v, want the optimum %v", n, si, opt)
		}
		lm := mustCost(t, sets, LargestMatch, Options{})
		want := math.Ldexp(1, n) - 1 + float64(n-1)*math.Ldexp(1, n-1)
		if lm != want {
			t.Errorf("n=%d: LargestMatch %v, want %v", n, lm, want)
		}
		if lm/opt < float64(n)/4 {
			t.Errorf("n=%d: LargestMatch ratio %.2f < n/4", n, lm/opt)
		}
		t.Logf("n=%d: LargestMatch %v, optimum %v, ratio %.2f; BalanceTree %v", n, lm, opt, lm/opt,
			mustCost(t, sets, BalanceTreeInput, Options{}))
	}
}

// Lemma 5.4: on disjoint sets the problem is Huffman coding and SmallestInput and SmallestOutput are
// optimal.
func TestDisjointSetsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 2 + rng.IntN(9)
		sets := make([]Set, n)
		next := uint64(0)
		for i := range sets {
			size := 1 + rng.IntN(20)
			sets[i] = span(next, next+uint64(size)-1)
			next += uint64(size)
		}
		_, opt, err := Optimal(sets)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Strategy{SmallestInput, SmallestOutput} {
			if c := mustCost(t, sets, s, Options{}); c != opt {
				t.Errorf("trial %d: %s %v, optimum %v", trial, s, c, opt)
			}
		}
	}
}

func harmonic(n int) float64 {
	h := 0.0
	for i := 1; i <= n; i++ {
		h += 1 / float64(i)
	}
	return h
}

// checkBounds checks every strategy on one instance against the optimum and the thesis's bounds.
func checkBounds(t *testing.T, name string, sets []Set) {
	t.Helper()
	_, opt, err := Optimal(sets)
	if err != nil {
		t.Fatal(err)
	}
	n := len(sets)
	if lb := LowerBound(sets); opt < lb {
		t.Fatalf("%s: optimum %v below the lower bound %v", name, opt, lb)
	}
	bounds := map[Strategy]float64{
		BalanceTreeInput: math.Ceil(math.Log2(float64(n))) + 1, BalanceTreeOutput: math.Ceil(math.Log2(float64(n))) + 1,
		SmallestInput: 2*harmonic(n) + 1, SmallestOutput: 2*harmonic(n) + 1,
	}
	for _, s := range Strategies {
		c := mustCost(t, sets, s, Options{Seed: uint64(n)})
		if c < opt {
			t.Fatalf("%s: %s costs %v, below the optimum %v", name, s, c, opt)
		}
		if b, ok := bounds[s]; ok && c > b*opt {
			t.Errorf("%s: %s costs %v > %.2f·OPT (OPT %v)", name, s, c, b, opt)
		}
	}
}

// Every instance of up to four runs over three keys, then random instances up to ten runs: every
// heuristic is at least the optimum and within its proven ratio.
func TestBoundsOnSmallInstances(t *testing.T) {
	subsets := []Set{}
	for m := uint64(1); m < 8; m++ {
		var keys []uint64
		for b := uint64(0); b < 3; b++ {
			if m&(1<<b) != 0 {
				keys = append(keys, b)
			}
		}
		subsets = append(subsets, Keys(keys...))
	}
	count := 0
	for n := 2; n <= 4; n++ {
		idx := make([]int, n)
		for {
			sets := make([]Set, n)
			for i, x := range idx {
				sets[i] = subsets[x]
			}
			checkBounds(t, fmt.Sprint(idx), sets)
			count++
			i := 0
			for i < n && idx[i] == len(subsets)-1 {
				idx[i] = 0
				i++
			}
			if i == n {
				break
			}
			idx[i]++
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 2 + rng.IntN(9)
		universe := 1 + rng.IntN(30)
		sets := make([]Set, n)
		for i := range sets {
			var keys []uint64
			for k := range universe {
				if rng.IntN(3) == 0 {
					keys = append(keys, uint64(k))
				}
			}
			if len(keys) == 0 {
				keys = []uint64{uint64(rng.IntN(universe))}
			}
			sets[i] = Keys(keys...)
		}
		checkBounds(t, fmt.Sprintf("random %d", trial), sets)
		count++
	}
	t.Logf("%d instances", count)
}

func TestKWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sets := make([]Set, 13)
	for i := range sets {
		var keys []uint64
		for range 50 {
			keys = append(keys, uint64(rng.IntN(400)))
		}
		sets[i] = Keys(keys...)
	}
	for _, k := range []int{2, 3, 4, 13} {
		for _, s := range Strategies {
			c := mustCost(t, sets, s, Options{Fanin: k})
			if rb := RootBound(sets); c < rb {
				t.Errorf("k=%d %s: cost %v below the root bound %v", k, s, c, rb)
			} else if k == len(sets) && s != Random && c != rb {
				t.Errorf("k=%d %s: one merge of every run costs %v, want the root bound %v", k, s, c, rb)
			}
		}
	}
	if _, err := Make(sets, Optimum, Options{Fanin: 3}); err == nil {
		t.Error("the optimum of 3-way merges should be refused")
	}
}

func TestPlanValidation(t *testing.T) {
	for _, tc := range []struct {
		p    Plan
		want bool
	}{
		{Plan{Runs: 1}, true},
		{Plan{Runs: 2, Merges: []Merge{{Inputs: []int{0, 1}}}}, true},
		{Plan{Runs: 3, Merges: []Merge{{Inputs: []int{0, 1}}}}, false},                        // run 2 never merged
		{Plan{Runs: 3, Merges: []Merge{{Inputs: []int{0, 1}}, {Inputs: []int{0, 2}}}}, false}, // 0 read twice
		{Plan{Runs: 3, Merges: []Merge{{Inputs: []int{0, 4}}, {Inputs: []int{1, 2}}}}, false}, // 4 before it exists
		{Plan{Runs: 3, Merges: []Merge{{Inputs: []int{0, 1, 2}}}}, false},                     // fan-in 2
	} {
		if err := tc.p.Validate(2); (err == nil) != tc.want {
			t.Errorf("%+v: %v", tc.p, err)
		}
	}
}

func TestIOCountsIntermediatesTwice(t *testing.T) {
	sets := []Set{set(1, 2), set(3), set(4)}
	p := Plan{Runs: 3, Merges: []Merge{{Inputs: []int{1, 2}}, {Inputs: []int{0, 3}}}}
	// Reads 1+1, writes 2, reads 2+2, writes 4.
	if got := IO(p, sets); got != 12 {
		t.Errorf("IO %v, want 12", got)
	}
}

func TestSketch(t *testing.T) {
	a, b := NewSketch(), NewSketch()
	ea, eb := []uint64{}, []uint64{}
	for i := range 200_000 {
		h := HashKey(fmt.Appendf(nil, "key-%d", i))
		if i < 150_000 {
			a.Add(h)
			ea = append(ea, h)
		}
		if i >= 100_000 {
			b.Add(h)
			eb = append(eb, h)
		}
	}
	for _, tc := range []struct {
		name string
		est  float64
		want float64
	}{
		{"a", a.Len(), 150_000}, {"b", b.Len(), 100_000}, {"a∪b", a.Union(b).Len(), 200_000},
		{"small", func() float64 { s := NewSketch(); s.Add(HashKey([]byte("x"))); return s.Len() }(), 1},
	} {
		if math.Abs(tc.est-tc.want)/tc.want > 0.03 {
			t.Errorf("%s: estimate %.0f, true %.0f", tc.name, tc.est, tc.want)
		}
	}
	if got := Keys(ea...).Union(Keys(eb...)).Len(); got != 200_000 {
		t.Errorf("exact union %v", got)
	}
}

// SmallestOutput planned on sketches, evaluated exactly, is close to SmallestOutput on exact sets.
func TestSketchedPlanCloseToExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	exact, sketched := []Set{}, []Set{}
	for i := range 12 {
		var keys []uint64
		sk := NewSketch()
		for range 2000 + i*500 {
			h := HashKey(fmt.Appendf(nil, "k%d", rng.IntN(20_000)))
			keys = append(keys, h)
			sk.Add(h)
		}
		exact, sketched = append(exact, Keys(keys...)), append(sketched, sk)
	}
	pe, _ := Make(exact, SmallestOutput, Options{})
	ps, _ := Make(sketched, SmallestOutput, Options{})
	ce, _ := Cost(pe, exact)
	cs, _ := Cost(ps, exact)
	if cs > 1.05*ce {
		t.Errorf("planned on sketches: %v, on exact sets: %v", cs, ce)
	}
	if _, err := Make([]Set{exact[0], sketched[1]}, SmallestInput, Options{}); err == nil {
		t.Error("a plan over mixed kinds should be refused")
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range append(Strategies, Optimum) {
		if got, err := ParseStrategy(s.String()); err != nil || got != s {
			t.Errorf("%s: %v %v", s, got, err)
		}
	}
	if _, err := ParseStrategy("nope"); err == nil {
		t.Error("unknown strategy accepted")
	}
}
