package readreplicas

import (
	"slices"
	"testing"
)

func TestRanksArePermutationsBySeed(t *testing.T) {
	for _, tt := range []struct {
		ranges int
		seed   uint64
	}{{1, 1}, {16, 1}, {16, 2}, {100, 7}} {
		o := Options{Ranges: tt.ranges, Seed: tt.seed}
		got := ranks(o)
		sorted := slices.Sorted(slices.Values(got))
		for i, r := range sorted {
			if r != i {
				t.Fatalf("ranks(%d ranges, seed %d) = %v: not a permutation", tt.ranges, tt.seed, got)
			}
		}
		if again := ranks(o); !slices.Equal(got, again) {
			t.Fatalf("ranks differ for one seed: %v, %v", got, again)
		}
	}
}

func TestArmNames(t *testing.T) {
	for k, want := range map[int]string{-1: "popularity", 0: "uniform-0", 2: "uniform-2"} {
		if got := armName(k); got != want {
			t.Fatalf("armName(%d) = %q, want %q", k, got, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Nodes != 5 || o.Ranges != 16 || o.Rate != 700 || o.IOPS != 500 || !slices.Equal(o.Uniform, []int{0, 1, 2}) || o.Zipf <= 1 {
		t.Fatalf("defaults %+v", o)
	}
	if o := (Options{Nodes: 3, Uniform: []int{1}}).withDefaults(); o.Nodes != 3 || !slices.Equal(o.Uniform, []int{1}) {
		t.Fatalf("given values not kept: %+v", o)
	}
}
