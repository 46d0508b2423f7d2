package tpcc

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestNURandRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ a, c, x, y int64 }{
		{1023, 259, 1, 3000}, {8191, 7911, 1, 100000}, {255, 223, 0, 999},
		{15, 3, 1, 30}, {0, 0, 1, 1}, {127, 100, 1, 200}, {8191, 8191, 1, 15},
	} {
		hit := map[int64]bool{}
		for range 200000 {
			v := NURand(r, tc.a, tc.c, tc.x, tc.y)
			if v < tc.x || v > tc.y {
				t.Fatalf("NURand(%d, %d, %d, %d) = %d, out of range", tc.a, tc.c, tc.x, tc.y, v)
			}
			hit[v] = true
		}
		// Every value of a small range is drawn: the skew never shuts one out.
		if n := tc.y - tc.x + 1; n <= 200 && int64(len(hit)) != n {
			t.Errorf("NURand(%d, %d, %d, %d) drew %d of %d values", tc.a, tc.c, tc.x, tc.y, len(hit), n)
		}
	}
}

func TestNURandIsSkewed(t *testing.T) {
	// At the spec's sizes the most drawn tenth of the items takes far more than a tenth of the draws.
	r := rand.New(rand.NewPCG(3, 4))
	const n, draws = 100000, 500000
	counts := make([]int, n+1)
	for range draws {
		counts[NURand(r, 8191, 1234, 1, n)]++
	}
	top := 0
	for _, c := range counts {
		if c > 2*draws/n {
			top += c
		}
	}
	if float64(top)/draws < 0.3 {
		t.Fatalf("items drawn more than twice the uniform share take %.2f of the draws; NURand looks uniform", float64(top)/draws)
	}
}

func TestScaledA(t *testing.T) {
	for _, tc := range []struct{ spec, n, want int64 }{
		{1023, 3000, 1023}, {8191, 100000, 8191}, {255, 1000, 255},
		{1023, 30, 15}, {8191, 1000, 511}, {255, 10, 7}, {8191, 16, 15}, {1023, 1, 0},
	} {
		if got := ScaledA(tc.spec, tc.n); got != tc.want {
			t.Errorf("ScaledA(%d, %d) = %d, want %d", tc.spec, tc.n, got, tc.want)
		}
	}
}

func TestInputRanges(t *testing.T) {
	in := NewInput(7)
	for _, s := range []Sizes{{1, 100000, 3000}, {1, 50, 10}, {1, 15, 1500}} {
		for range 20000 {
			if c := in.CustomerID(s.Customers); c < 1 || c > int64(s.Customers) {
				t.Fatalf("customer id %d outside 1..%d", c, s.Customers)
			}
			if i := in.ItemID(s.Items); i < 1 || i > int64(s.Items) {
				t.Fatalf("item id %d outside 1..%d", i, s.Items)
			}
			if l := in.LastNameNumber(s.Customers); l < 0 || l >= min(int64(s.Customers), 1000) {
				t.Fatalf("last name number %d outside the %d names loaded", l, min(s.Customers, 1000))
			}
		}
	}
	for range 1000 {
		if o := in.OtherWarehouse(3, 5); o == 3 || o < 1 || o > 5 {
			t.Fatalf("other warehouse of 3 in 1..5: %d", o)
		}
		if s := in.AString(8, 16); len(s) < 8 || len(s) > 16 {
			t.Fatalf("AString(8, 16) has length %d", len(s))
		}
		if f := in.Float(1, 5000); f < 1 || f > 5000 || math.Abs(math.Round(f*100)-f*100) > 1e-6 {
			t.Fatalf("Float(1, 5000) = %v", f)
		}
	}
}

func TestLastName(t *testing.T) {
	for n, want := range map[int64]string{0: "BARBARBAR", 371: "PRICALLYOUGHT", 999: "EINGEINGEING", 40: "BARPRESBAR"} {
		if got := LastName(n); got != want {
			t.Errorf("LastName(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestMixProportions(t *testing.T) {
	in := NewInput(11)
	const draws = 200000
	var counts [numKinds]int
	for range draws {
		counts[in.Pick()]++
	}
	total := 0
	for k, p := range MixPercent {
		total += p
		got := 100 * float64(counts[k]) / draws
		if math.Abs(got-float64(p)) > 0.5 {
			t.Errorf("%v: %.2f %% of %d draws, want %d %%", Kind(k), got, draws, p)
		}
	}
	if total != 100 {
		t.Fatalf("the mix adds up to %d %%", total)
	}
}
