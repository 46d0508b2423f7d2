package catchup

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
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
	rs := []Replica{
		{RangeID: 10, Applied: 300, Leader: 2, Voters: []uint64{2, 3}},
		{RangeID: 11, Applied: 80, Voters: []uint64{2, 3}},
		{RangeID: 12, Applied: 5, Leader: self, Voters: []uint64{2, 3}},
		{RangeID: 13, Applied: 1, Leader: 2, Voters: []uint64{2}},
		{RangeID: 14, Applied: 1},
	}
	down[2] = true // r13's only peer does not answer yet
	tg := targets{}
	if got := tg.pending(context.Background(), self, rs, ask); !slices.Equal(got, []uint64{10, 11, 13}) {
		t.Fatalf("behind = %v, want [10 11 13]", got)
	}
	if tg[10] != 480 || tg[11] != 90 || tg[12] != 0 || tg[14] != 0 {
		t.Fatalf("targets = %v: r10 from n3 (its leader n2 did not answer), r11 the highest voter's, r12 and r14 none", tg)
	}
	down[2] = false
	rs[0].Applied, rs[1].Applied, rs[3].Applied = 480, 90, 39
	if got := tg.pending(context.Background(), self, rs, ask); !slices.Equal(got, []uint64{13}) {
		t.Fatalf("behind = %v, want [13] (r13 now asked: 40 > 39)", got)
	}
	rs[3].Applied = 40
	if got := tg.pending(context.Background(), self, rs, ask); len(got) != 0 {
		t.Fatalf("behind = %v, want none", got)
	}
	if asks[[2]uint64{3, 10}] != 1 || asks[[2]uint64{2, 13}] != 2 || asks[[2]uint64{2, 12}] != 0 {
		t.Fatalf("asks = %v: a target is asked for until a peer answers, then never again; a range led here never", asks)
	}
}

// TestTrackerEnds: the node is catching up until every replica reached its target; then the
// callback runs once, Wait returns true, and poststart answers at once; before that, poststart
// answers "still catching up" when its wait ends.
func TestTrackerEnds(t *testing.T) {
	var mu sync.Mutex
	applied := uint64(10)
	kicks := 0
	tr := New(Deps{
		Self: func() uint64 { return 1 },
		Replicas: func() []Replica {
			mu.Lock()
			defer mu.Unlock()
			return []Replica{{RangeID: 7, Applied: applied, Leader: 2, Voters: []uint64{2, 3}}}
		},
		Ask:      func(context.Context, uint64, uint64) (uint64, error) { return 20, nil },
		CaughtUp: func() { mu.Lock(); kicks++; mu.Unlock() },
	})
	if !tr.CatchingUp() {
		t.Fatal("a new tracker must be catching up")
	}
	done := make(chan struct{})
	go func() { tr.Run(context.Background()); close(done) }()
	if r := tr.PostStart(context.Background(), 100*time.Millisecond); !strings.HasPrefix(r.GetOutcome(), "replicas still catching up") {
		t.Fatalf("poststart before the catch-up = %q", r.GetOutcome())
	}
	if r := tr.PostStart(context.Background(), 0); r.GetError().GetCode() != pb.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("poststart with no duration = %v", r)
	}
	mu.Lock()
	applied = 20
	mu.Unlock()
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if !tr.Wait(ctx) || tr.CatchingUp() {
		t.Fatal("the catch-up did not end once the replica reached its leader's index")
	}
	if r := tr.PostStart(context.Background(), time.Second); !strings.HasPrefix(r.GetOutcome(), "replicas caught up") || r.GetNodeId() != 1 {
		t.Fatalf("poststart after the catch-up = %v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if kicks != 1 {
		t.Fatalf("caught-up callback ran %d times, want 1", kicks)
	}
}
