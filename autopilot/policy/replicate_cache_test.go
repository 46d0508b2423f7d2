package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// TestReplicateRemembersOnlyWhatStillHolds: a replicate policy that reuses its last round's verdicts
// for ranges shared between snapshots proposes, round after round, what a fresh one proposes, while
// a node dies, ranges change and a learner appears.
func TestReplicateRemembersOnlyWhatStillHolds(t *testing.T) {
	now := time.Unix(10_000, 0)
	var ranges []*model.Range
	for i := 0; i < 40; i++ {
		ranges = append(ranges, &model.Range{ID: uint64(i + 2), StartKey: []byte(fmt.Sprintf("k%02d", i)), Leader: uint64(1 + i%4),
			Replicas: []model.Replica{{Node: uint64(1 + i%4)}, {Node: uint64(1 + (i+1)%4)}, {Node: uint64(1 + (i+2)%4)}}})
	}
	kept := NewReplicate(ReplicateConfig{}, 0)
	for round := 0; round < 12; round++ {
		now = now.Add(30 * time.Second)
		switch round {
		case 3: // a learner on a range that has its voters: a stray
			r := *ranges[5]
			r.Replicas = append(append([]model.Replica(nil), r.Replicas...), model.Replica{Node: 5, Learner: true})
			ranges[5] = &r
		case 6: // a range loses a voter
			r := *ranges[9]
			r.Replicas = r.Replicas[:2]
			ranges[9] = &r
		}
		nodes := func() []*model.Node {
			var out []*model.Node
			for id := uint64(1); id <= 5; id++ {
				hb := now
				if id == 4 && round >= 4 {
					hb = time.Unix(10_000, 0) // n4 silent since the start: dead after 60 s
				}
				out = append(out, &model.Node{ID: id, Live: hb.Equal(now), LastHeartbeat: hb})
			}
			return out
		}
		got := kept.Propose(model.NewCluster(now, nodes(), append([]*model.Range(nil), ranges...)), nil)
		want := NewReplicate(ReplicateConfig{}, 0).Propose(model.NewCluster(now, nodes(), append([]*model.Range(nil), ranges...)), nil)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %v, want %v", round, got, want)
		}
		if round == 4 && len(want) == 0 {
			t.Fatal("nothing proposed for a dead node's replicas")
		}
	}
}
