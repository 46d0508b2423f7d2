package supervisor

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints"
)

// fakeNode answers waits from a fixed sequence of warmth reports, one per call, as a node whose
// replays change between the calls would; it records the criteria it was asked.
type fakeNode struct {
	seen  []hints.Warmth
	asked []hints.WarmCriteria
}

func (f *fakeNode) wait(crit hints.WarmCriteria, _ time.Duration) (hints.Warmth, bool, error) {
	f.asked = append(f.asked, crit)
	w := f.seen[min(len(f.asked), len(f.seen))-1]
	return w, crit.Check(w) == nil, nil
}

func flowingWarmth(replays uint64, hit float64) hints.Warmth {
	return hints.Warmth{RangeID: 7, Known: true, ApplyLag: 80 * time.Millisecond, Idle: 30 * time.Millisecond,
		HitRatio: hit, Replays: replays, HintsApplied: 535}
}

func TestWaitWarm(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seen     []hints.Warmth
		ref      float64
		refKnown bool
		warm     bool
		asks     int
	}{
		// TestProfileChangeByRollingRestart's shed targets: hundreds of hints applied, none of their
		// replays read a block (memtables, or keys replayed within the second). Nothing to warm.
		{"flowing, no block read measured", []hints.Warmth{flowingWarmth(0, math.NaN())}, 0.95, true, true, 1},
		{"flowing, too few replays to judge", []hints.Warmth{flowingWarmth(warmMinReplays-1, 0.1)}, 0.95, true, true, 1},
		{"flowing, replays hit as the reference", []hints.Warmth{flowingWarmth(40, 0.9)}, 0.95, true, true, 1},
		{"flowing, no reference to judge by", []hints.Warmth{flowingWarmth(40, 0.2)}, 0, false, true, 1},
		// Measured and cold: the second wait asks for the hit ratio; the cache warmed meanwhile.
		{"measured cold, then warm", []hints.Warmth{flowingWarmth(40, 0.3), flowingWarmth(40, 0.88)}, 0.95, true, true, 2},
		{"measured cold to the end", []hints.Warmth{flowingWarmth(40, 0.3), flowingWarmth(48, 0.5)}, 0.95, true, false, 2},
		{"no hints", []hints.Warmth{{RangeID: 7}}, 0.95, true, false, 1},
		{"hints stopped", []hints.Warmth{{RangeID: 7, Known: true, Idle: 4 * time.Second, HintsApplied: 90}}, 0.95, true, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNode{seen: tc.seen}
			_, err := waitWarm(f.wait, tc.ref, tc.refKnown, WarmWait)
			if (err == nil) != tc.warm {
				t.Errorf("warm = %v (%v), want %v", err == nil, err, tc.warm)
			}
			if !tc.warm && !errors.Is(err, hints.ErrNotWarm) {
				t.Errorf("err = %v, want one naming the unmet criterion (ErrNotWarm)", err)
			}
			if len(f.asked) != tc.asks {
				t.Errorf("%d waits, want %d", len(f.asked), tc.asks)
			}
			if f.asked[0].MinReplays != 0 || f.asked[0].MinHitRatio != 0 {
				t.Errorf("first wait asks %+v: it must ask only that hints flow", f.asked[0])
			}
			if len(f.asked) == 2 && (f.asked[1].MinReplays != warmMinReplays || math.Abs(f.asked[1].MinHitRatio-warmShare*tc.ref) > 1e-9) {
				t.Errorf("second wait asks %+v: want %d replays at %.3f", f.asked[1], warmMinReplays, warmShare*tc.ref)
			}
		})
	}
}
