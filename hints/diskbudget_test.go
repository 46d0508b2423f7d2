package hints

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

// The budget's controller: each interval it scales the fraction down in proportion while replays
// cause more than Share of the engine's misses on a saturated disk, and lets it back up otherwise.
func TestDiskBudgetFactor(t *testing.T) {
	var engineMisses atomic.Uint64
	var saturated atomic.Bool
	a := newTestApplier(t, newCacheModel(), ApplierConfig{Adaptive: true, DiskBudget: DiskBudget{Share: 0.1,
		Saturated: saturated.Load, Misses: engineMisses.Load, Interval: time.Second}})
	now := time.Unix(1000, 0)
	// step advances one interval in which the engine missed `misses` blocks, `replayed` of them
	// for replays, and returns the factor.
	step := func(misses, replayed uint64) float64 {
		engineMisses.Add(misses)
		a.c.replayMissBlocks.Add(replayed)
		now = now.Add(time.Second)
		a.loadMu.Lock()
		defer a.loadMu.Unlock()
		return a.budgetFactor(now)
	}
	if f := step(0, 0); f != 1 {
		t.Fatalf("first call: factor %v, want 1", f)
	}
	saturated.Store(true)
	for i, tc := range []struct {
		misses, replayed uint64
		saturated        bool
		want             float64
		why              string
	}{
		{1000, 50, true, 1, "replays cause 5 % of the misses: within the budget"},
		{1000, 400, true, 0.25, "40 %: cut to a quarter"},
		{1000, 200, true, 0.125, "still 20 % at a quarter: halved again"},
		{1000, 1000, true, 0.05, "never below MinFactor"},
		{10, 10, true, 0.075, "too few misses to judge: back up by half"},
		{1000, 900, false, 0.1125, "disk not saturated: back up"},
		{1000, 20, true, 0.16875, "2 %: back up"},
	} {
		saturated.Store(tc.saturated)
		if got := step(tc.misses, tc.replayed); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("step %d (%s): factor %v, want %v", i, tc.why, got, tc.want)
		}
	}
	if got := a.Metrics().DiskBudgetFactor; math.Abs(got-0.16875) > 1e-9 {
		t.Errorf("metric: %v", got)
	}
	// Within an interval the factor holds, and so it does for a time from before the last
	// measurement (a worker that took its time before waiting for the lock).
	for _, at := range []time.Time{now.Add(500 * time.Millisecond), now.Add(-time.Millisecond)} {
		a.loadMu.Lock()
		got := a.budgetFactor(at)
		a.loadMu.Unlock()
		if math.Abs(got-0.16875) > 1e-9 {
			t.Errorf("at %v from the last measurement: %v", at.Sub(now), got)
		}
	}
}

func TestMissedBlocks(t *testing.T) {
	b := DiskBudget{}.withDefaults()
	for _, tc := range []struct{ bytes, want uint64 }{{0, 0}, {1, 1}, {4096, 1}, {4097, 2}, {3 * 4096, 3}} {
		if got := b.missedBlocks(tc.bytes); got != tc.want {
			t.Errorf("missedBlocks(%d) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
}

// blockReader is a cacheModel whose every miss reads `blocks` blocks, as a cold point read misses
// its index, filter and data blocks.
type blockReader struct {
	*cacheModel
	blocks uint64
}

func (r blockReader) Get(ctx context.Context, rangeID uint64, key []byte) (ReplayStats, error) {
	st, err := r.cacheModel.Get(ctx, rangeID, key)
	st.CacheMiss *= r.blocks * 4096
	return st, err
}

// End to end: on a saturated disk, an applier whose replays all miss (three blocks each) applies a
// share of its hints that keeps its missed blocks near the budget; without the budget it applies
// everything.
func TestDiskBudgetLimitsMissingReplays(t *testing.T) {
	for _, budget := range []bool{false, true} {
		t.Run(fmt.Sprintf("budget=%v", budget), func(t *testing.T) {
			var clientMisses atomic.Uint64
			cfg := ApplierConfig{Workers: 1, QueueLen: 64, Adaptive: true, LoadInterval: time.Nanosecond,
				Load: func() float64 { return 0 }}
			var a *Applier
			if budget {
				// The engine counts every block any reader missed: the clients' and the replays'.
				cfg.DiskBudget = DiskBudget{Share: 0.1, Saturated: func() bool { return true },
					Interval: time.Millisecond,
					Misses:   func() uint64 { return clientMisses.Load() + a.c.replayMissBlocks.Load() }}
			}
			a = newTestApplier(t, blockReader{newCacheModel(), 3}, cfg)
			a.Start()
			applied := 0.0
			for b := range 20 {
				clientMisses.Add(2700) // the clients' own missed blocks in the interval
				keys := manyKeys(fmt.Sprintf("b%d-", b), 500)
				before := a.Metrics()
				a.Receive([]hint.RangeHints{rangeOf(1, keys...)}, time.Now())
				eventually(t, 10*time.Second, "batch handled", func() bool {
					m := a.Metrics()
					return m.Applied+m.Dropped[DropSelective]-before.Applied-before.Dropped[DropSelective] == 500
				})
				time.Sleep(2 * time.Millisecond) // let the next batch start a new interval
				if b >= 10 {
					applied += float64(a.Metrics().Applied-before.Applied) / 500
				}
			}
			share := applied / 10
			if !budget && share != 1 {
				t.Errorf("without a budget %.2f of the hints were applied, want all", share)
			}
			// 10 % of ~3000 missed blocks an interval is ~300 blocks, 100 replays of three: a fifth of
			// 500 fresh keys (up to about a third when a worker starts late and measures an empty
			// interval, which lets the factor up by half).
			if budget && (share > 0.4 || share < 0.05) {
				t.Errorf("with a budget %.2f of the hints were applied, want about 0.2 (0.05-0.4)", share)
			}
		})
	}
}
