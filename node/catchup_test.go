package node

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestCatchUpTargets: a replica is behind until it has applied what its leader had applied when
// asked (each range asked once); a replica with no leader heard yet takes the highest of its other
// voters' applied indexes; one this node leads, or with no other voter, has nothing to catch up; a
// range no peer answered for stays behind and is asked again.
func TestCatchUpTargets(t *testing.T) {
	const self = 1
	applied := map[[2]uint64]uint64{ // (node, range) → applied index
		{2, 10}: 500, {3, 10}: 480,
		{2, 11}: 70, {3, 11}: 90, // r11: no leader known, n3 is ahead
		{2, 13}: 40,
	}
	down := map[uint64]bool{}
	asks := map[[2]uint64]int{}
	ask := func(_ context.Context, node, rangeID uint64) (uint64, error) {
		asks[[2]uint64{node, rangeID}]++
		a, ok := applied[[2]uint64{node, rangeID}]
		if !ok || down[node] {
			return 0, errors.New("unreachable")
		}
		return a, nil
	}
	rs := []catchUpReplica{
		{rangeID: 10, applied: 300, leader: 2, voters: []uint64{2, 3}},
		{rangeID: 11, applied: 80, voters: []uint64{2, 3}},
		{rangeID: 12, applied: 5, leader: self, voters: []uint64{2, 3}},
		{rangeID: 13, applied: 1, leader: 2, voters: []uint64{2}},
		{rangeID: 14, applied: 1},
	}
	down[2] = true // r13's only peer does not answer yet
	tg := catchUpTargets{}
	if got := tg.pending(context.Background(), self, rs, ask); !slices.Equal(got, []uint64{10, 11, 13}) {
		t.Fatalf("behind = %v, want [10 11 13]", got)
	}
	if tg[10] != 480 || tg[11] != 90 || tg[12] != 0 || tg[14] != 0 {
		t.Fatalf("targets = %v: r10 from n3 (its leader n2 did not answer), r11 the highest voter's, r12 and r14 none", tg)
	}
	down[2] = false
	rs[0].applied, rs[1].applied, rs[3].applied = 480, 90, 39
	if got := tg.pending(context.Background(), self, rs, ask); !slices.Equal(got, []uint64{13}) {
		t.Fatalf("behind = %v, want [13] (r13 now asked: 40 > 39)", got)
	}
	rs[3].applied = 40
	if got := tg.pending(context.Background(), self, rs, ask); len(got) != 0 {
		t.Fatalf("behind = %v, want none", got)
	}
	if asks[[2]uint64{3, 10}] != 1 || asks[[2]uint64{2, 13}] != 2 || asks[[2]uint64{2, 12}] != 0 {
		t.Fatalf("asks = %v: a target is asked for until a peer answers, then never again; a range led here never", asks)
	}
}
