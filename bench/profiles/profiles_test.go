package profiles

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pingcap/go-ycsb/pkg/util"

	"github.com/shoaldb/shoal/bench/ycsb"
	"github.com/shoaldb/shoal/pb"
)

// TestSplitKeysCutRecordsEvenly checks that the split keys cut a tenant's hashed record keys (all of
// which begin "user6" for twenty thousand records) into ranges of as many records, and ordered keys
// alike.
func TestSplitKeysCutRecordsEvenly(t *testing.T) {
	const records = 20000
	for _, order := range []string{"hashed", "ordered"} {
		ts, err := ycsb.ParseTenants("a:hotspot", ycsb.Config{Records: records, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts[0].Config.Props["insertorder"] = order
		keys, err := splitKeys(ts[0], records, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 3 {
			t.Fatalf("%s: %d split keys, want 3", order, len(keys))
		}
		counts := make([]int, len(keys)+1)
		for n := range int64(records) {
			k := n
			if order == "hashed" {
				k = util.Hash64(n)
			}
			name, r := fmt.Sprintf("user%d", k), 0
			for r < len(keys) && name >= keys[r] {
				r++
			}
			counts[r]++
		}
		for r, c := range counts {
			if c != records/4 {
				t.Errorf("%s: range %d holds %d records, want %d (split keys %q)", order, r, c, records/4, keys)
			}
		}
	}
}

// TestRandomPlacementEvensCounts checks that the random leaders are voters of their ranges and no
// node leads more than ⌈ranges/nodes⌉, whatever the draw, and that two seeds draw differently.
func TestRandomPlacementEvensCounts(t *testing.T) {
	var rs []*pb.RangeStatus
	for i := range uint64(13) {
		d := &pb.RangeDescriptor{RangeId: i + 2}
		for _, n := range []uint64{1 + i%5, 1 + (i+1)%5, 1 + (i+3)%5} {
			d.Replicas = append(d.Replicas, &pb.ReplicaDescriptor{NodeId: n})
		}
		rs = append(rs, &pb.RangeStatus{Desc: d})
	}
	draws := map[string]bool{}
	for seed := range uint64(20) {
		place := randomPlacement(rs, 5, rand.New(rand.NewPCG(seed, 0)))
		led := map[uint64]int{}
		for _, r := range rs {
			to, ok := place[r.Desc.RangeId]
			if !ok || !slices.Contains(voters(r), to) {
				t.Fatalf("seed %d: r%d led by n%d, not one of its voters %v", seed, r.Desc.RangeId, to, voters(r))
			}
			led[to]++
		}
		for n, k := range led {
			if k > 3 {
				t.Errorf("seed %d: n%d leads %d of 13 ranges, more than ⌈13/5⌉ = 3", seed, n, k)
			}
		}
		draws[fmt.Sprint(place)] = true
	}
	if len(draws) < 2 {
		t.Errorf("20 seeds drew %d placement(s)", len(draws))
	}
}
