package readhints

import (
	"slices"
	"testing"
)

func TestRegionOne(t *testing.T) {
	regions := map[uint64]string{2: "eu", 3: "us", 4: "us", 5: "ap", 6: ""}
	region := func(n uint64) string { return regions[n] }
	for _, tc := range []struct {
		peers []uint64
		own   string
		want  []uint64
	}{
		{[]uint64{2, 3, 4, 5}, "eu", []uint64{3, 5}}, // one in each other region, the preferred first
		{[]uint64{4, 3}, "eu", []uint64{4}},          // the first listed of a region
		{[]uint64{3, 4}, "us", []uint64{3}},          // every peer in the own region: one successor
		{[]uint64{6, 2}, "", []uint64{2}},            // no locality: regions unknown are "own"
		{nil, "eu", nil},
	} {
		if got := regionOne(tc.peers, region, tc.own); !slices.Equal(got, tc.want) {
			t.Errorf("regionOne(%v, own %q) = %v, want %v", tc.peers, tc.own, got, tc.want)
		}
	}
}
