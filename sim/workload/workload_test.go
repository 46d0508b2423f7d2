package workload

import (
	"bytes"
	"math"
	"math/rand"
	randv2 "math/rand/v2"
	"testing"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"
	"github.com/pingcap/go-ycsb/pkg/util"
)

func TestKeysSortAsRecords(t *testing.T) {
	for _, i := range []int64{0, 1, 9, 10, 99_999, 123_456_789} {
		if bytes.Compare(Key(i), Key(i+1)) >= 0 {
			t.Fatalf("Key(%d)=%s does not sort before Key(%d)=%s", i, Key(i), i+1, Key(i+1))
		}
		if got := Index(Key(i), 1<<30); got != i {
			t.Fatalf("Index(Key(%d)) = %d", i, got)
		}
	}
	if got := Index([]byte("user"), 100); got != 0 {
		t.Fatalf("Index of the prefix is %d, want 0", got)
	}
}

// bins counts n draws of next over records [0, records) in equal bins.
func bins(n, records int64, nbins int, next func() int64) []float64 {
	out := make([]float64, nbins)
	for i := int64(0); i < n; i++ {
		out[next()*int64(nbins)/records]++
	}
	for i := range out {
		out[i] /= float64(n)
	}
	return out
}

// TestSharesMatchGoYCSB: every distribution's Share over equal bins against go-ycsb's generator
// drawing one request at a time; the shares sum to 1 and each bin agrees within sampling noise.
func TestSharesMatchGoYCSB(t *testing.T) {
	const records, nbins = 200_000, 50
	draws := int64(2_000_000)
	if raceEnabled {
		draws = 200_000
	}
	r := rand.New(rand.NewSource(1))
	latestBasis := generator.NewCounter(records)
	tests := []struct {
		dist Dist
		gen  func() int64
	}{
		{Uniform{N: records}, func() func() int64 {
			g := generator.NewUniform(0, records-1)
			return func() int64 { return g.Next(r) }
		}()},
		{NewZipfian(records), func() func() int64 {
			g := generator.NewScrambledZipfian(0, records-1, generator.ZipfianConstant)
			return func() int64 { return g.Next(r) }
		}()},
		{Hotspot{N: records, Lo: 0, Hot: records / 5, Ops: 0.8}, func() func() int64 {
			g := generator.NewHotspot(0, records-1, 0.2, 0.8)
			return func() int64 { return g.Next(r) }
		}()},
		{NewLatest(records), func() func() int64 {
			g := generator.NewSkewedLatest(latestBasis)
			return func() int64 { return min(g.Next(r), records-1) }
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.dist.Name(), func(t *testing.T) {
			emp := bins(draws, records, nbins, tt.gen)
			var sum, worst float64
			for b := 0; b < nbins; b++ {
				lo, hi := int64(b)*records/nbins, int64(b+1)*records/nbins
				share := tt.dist.Share(lo, hi)
				sum += share
				// 4 standard deviations of a binomial share, plus 0.2 % for the generators' rounding.
				tol := 4*math.Sqrt(share*(1-share)/float64(draws)) + 0.002*share + 1e-5
				if d := math.Abs(share - emp[b]); d > tol {
					t.Errorf("bin %d: share %.5f, go-ycsb drew %.5f (tolerance %.5f)", b, share, emp[b], tol)
				}
				worst = max(worst, math.Abs(share-emp[b]))
			}
			if math.Abs(sum-1) > 1e-6 {
				t.Fatalf("shares sum to %v", sum)
			}
			t.Logf("largest bin difference %.5f", worst)
		})
	}
}

// TestSampleStaysInsideAndFollowsShares: draws conditioned on a span land in it, in the proportions
// Share gives its halves.
func TestSampleStaysInsideAndFollowsShares(t *testing.T) {
	const records = 100_000
	r := randv2.New(randv2.NewPCG(3, 4))
	var dists []Dist
	for _, name := range []string{"uniform", "zipfian", "hotspot", "latest"} {
		d, err := New(name, records)
		if err != nil {
			t.Fatal(err)
		}
		dists = append(dists, d)
	}
	// Two tenants: a small hot one (half the requests on 2 % of the records) and a large cold one.
	dists = append(dists, Tenants{Ends: []int64{2000, records}, Ops: []float64{1, 1}})
	for _, d := range dists {
		name := d.Name()
		if s := d.Share(0, records); math.Abs(s-1) > 1e-9 {
			t.Errorf("%s: the shares of every record sum to %v", name, s)
		}
		for _, span := range [][2]int64{{0, records}, {40, 5000}, {90_000, records}} {
			lo, hi := span[0], span[1]
			mid := (lo + hi) / 2
			want := d.Share(lo, mid) / d.Share(lo, hi)
			n := 40_000
			if raceEnabled {
				n = 4_000
			}
			below := 0
			for i := 0; i < n; i++ {
				x := d.Sample(r, lo, hi)
				if x < lo || x >= hi {
					t.Fatalf("%s: sample %d outside [%d, %d)", name, x, lo, hi)
				}
				if x < mid {
					below++
				}
			}
			if got := float64(below) / float64(n); math.Abs(got-want) > 4*math.Sqrt(want*(1-want)/float64(n))+0.01 {
				t.Errorf("%s [%d,%d): %.3f of samples in the lower half, Share says %.3f", name, lo, hi, got, want)
			}
		}
	}
	if _, err := New("pareto", 10); err == nil {
		t.Fatal("an unknown distribution was accepted")
	}
}

func TestHashIsGoYCSBs(t *testing.T) {
	for _, n := range []int64{0, 1, 2, 255, 256, 1 << 40, 9_999_999_999} {
		if got, want := hash64(n), util.Hash64(n); got != want {
			t.Fatalf("hash64(%d) = %d, go-ycsb %d", n, got, want)
		}
	}
}

func TestDiurnal(t *testing.T) {
	d := Diurnal{Mean: 1000, Amplitude: 0.5, Period: time.Hour}
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{0, 1000}, {15 * time.Minute, 1500}, {30 * time.Minute, 1000}, {45 * time.Minute, 500}} {
		if got := d.At(tt.at); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("at %v: %v, want %v", tt.at, got, tt.want)
		}
	}
}

// TestZipfianShared: NewZipfian hands out the one it built for the same size (they are never
// changed), and one built afresh has the same shares to the last bit.
func TestZipfianShared(t *testing.T) {
	a, b := NewZipfian(30000), NewZipfian(30000)
	if a != b {
		t.Fatal("two Zipfians built for 30000 records")
	}
	fresh := newZipfian(30000)
	for lo := int64(0); lo < 30000; lo += 2500 {
		if x, y := a.Share(lo, lo+2500), fresh.Share(lo, lo+2500); x != y {
			t.Fatalf("records [%d, %d): shared %v, fresh %v", lo, lo+2500, x, y)
		}
	}
	if NewZipfian(20000) == a {
		t.Fatal("another size got the same Zipfian")
	}
}
