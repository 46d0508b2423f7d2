package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

// TestShedServedMatchesPerSnapshotCrediting: the lazily kept time each node led each range equals
// crediting every range's previous leader on every snapshot (the definition), over snapshots that
// share unchanged ranges, change leaders, drop and add ranges, repeat an instant and leave gaps
// longer than a minute.
func TestShedServedMatchesPerSnapshotCrediting(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := NewShed(ShedConfig{})
	want := map[uint64]map[uint64]time.Duration{}
	prevLeader := map[uint64]uint64{}
	var lastSeen time.Time
	now := time.Unix(1000, 0)
	nextID := uint64(30)
	var ranges []*model.Range
	for i := 0; i < 20; i++ {
		ranges = append(ranges, &model.Range{ID: uint64(i + 1), StartKey: []byte(fmt.Sprintf("k%03d", i)), Leader: uint64(1 + rng.IntN(3)),
			Replicas: []model.Replica{{Node: 1}, {Node: 2}, {Node: 3}}})
	}
	for step := 0; step < 400; step++ {
		switch rng.IntN(12) {
		case 0: // a gap over a minute
			now = now.Add(2 * time.Minute)
		case 1: // the same instant again
		default:
			now = now.Add(time.Duration(100+rng.IntN(2000)) * time.Millisecond)
		}
		next := append([]*model.Range(nil), ranges...)
		for k := rng.IntN(3); k > 0; k-- { // new leaders, as new values
			i := rng.IntN(len(next))
			r := *next[i]
			r.Leader = uint64(rng.IntN(4)) // 0: no leader
			next[i] = &r
		}
		if rng.IntN(10) == 0 && len(next) > 5 { // a range leaves (merged away)
			i := rng.IntN(len(next))
			next = append(next[:i], next[i+1:]...)
		}
		if rng.IntN(10) == 0 { // a range arrives (split off)
			next = append(next, &model.Range{ID: nextID, StartKey: []byte(fmt.Sprintf("k%03d", nextID)), Leader: 2,
				Replicas: []model.Replica{{Node: 1}, {Node: 2}, {Node: 3}}})
			nextID++
		}
		ranges = next
		c := model.NewCluster(now, nil, append([]*model.Range(nil), ranges...))
		if !lastSeen.IsZero() && now.After(lastSeen) {
			dt := min(now.Sub(lastSeen), time.Minute)
			for id, l := range prevLeader {
				if want[id] == nil {
					want[id] = map[uint64]time.Duration{}
				}
				want[id][l] += dt
			}
		}
		lastSeen = now
		clear(prevLeader)
		for _, r := range c.Ranges {
			if r.Leader != 0 {
				prevLeader[r.ID] = r.Leader
			}
		}
		p.observe(c)
		for _, r := range c.Ranges {
			for n := uint64(1); n <= 3; n++ {
				if got := p.servedBy(r.ID, n); got != want[r.ID][n] {
					t.Fatalf("step %d: r%d n%d served %v, want %v", step, r.ID, n, got, want[r.ID][n])
				}
			}
		}
	}
}
