package hints

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

func TestWarmCriteriaCheck(t *testing.T) {
	warm := Warmth{RangeID: 4, Known: true, ApplyLag: 100 * time.Millisecond, Idle: 50 * time.Millisecond,
		HitRatio: 0.95, Replays: 100}
	crit := WarmCriteria{MaxApplyLag: time.Second, MinHitRatio: 0.9, MinReplays: 16, MaxIdle: 2 * time.Second}
	for _, tc := range []struct {
		name   string
		mutate func(*Warmth)
		reason string // "" = warm
	}{
		{"warm", func(*Warmth) {}, ""},
		{"unknown", func(w *Warmth) { w.Known = false }, "no hints applied"},
		{"idle", func(w *Warmth) { w.Idle = 3 * time.Second }, "last hints applied"},
		{"lagging", func(w *Warmth) { w.ApplyLag = 1500 * time.Millisecond }, "apply lag"},
		{"too few replays", func(w *Warmth) { w.Replays = 3 }, "replays measured"},
		{"cold", func(w *Warmth) { w.HitRatio = 0.4 }, "hit ratio 0.40"},
		{"no ratio", func(w *Warmth) { w.HitRatio = math.NaN() }, "hit ratio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := warm
			tc.mutate(&w)
			err := crit.Check(w)
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("not warm: %v", err)
			case tc.reason != "" && (!errors.Is(err, ErrNotWarm) || !strings.Contains(err.Error(), tc.reason) ||
				!strings.Contains(err.Error(), "range 4")):
				t.Fatalf("error %v, want ErrNotWarm about %q naming the range", err, tc.reason)
			}
		})
	}
	if err := (WarmCriteria{}).Check(Warmth{Known: true, HitRatio: math.NaN()}); err != nil {
		t.Fatalf("zero criteria check nothing but Known: %v", err)
	}
	if c := DefaultWarmCriteria().RelativeTo(0.6, 0.9); math.Abs(c.MinHitRatio-0.54) > 1e-9 {
		t.Fatalf("RelativeTo: %v", c.MinHitRatio)
	}
}

// The replay hit ratio rises as a follower's (model) cache fills, and lag reflects capture time.
func TestWarmthTracksReplays(t *testing.T) {
	model := newCacheModel()
	a := newTestApplier(t, model, ApplierConfig{Workers: 1, WarmthWindow: 2})
	a.Start()
	if w := a.Warmth(5); w.Known || !math.IsNaN(w.HitRatio) {
		t.Fatalf("warmth before any hint: %+v", w)
	}
	keys := manyKeys("hot", 50)
	old := hint.RangeHints{RangeID: 5, CapturedAt: time.Now().Add(-time.Hour), Hints: pointHints(keys...)}
	a.Receive([]hint.RangeHints{old}, time.Now())
	eventually(t, 5*time.Second, "first batch", func() bool { return a.Warmth(5).HintsApplied == 50 })
	w := a.Warmth(5)
	if w.HitRatio != 0 || w.Replays != 50 || w.ApplyLag < time.Hour {
		t.Fatalf("after a cold batch: %+v", w)
	}
	// The same hot set again, twice: the window (2 batches) then holds only hits.
	captured := time.Now()
	for i := 0; i < 2; i++ {
		a.Receive([]hint.RangeHints{rangeOf(5, keys...)}, time.Now())
	}
	eventually(t, 5*time.Second, "later batches", func() bool { return a.Warmth(5).HintsApplied == 150 })
	w = a.Warmth(5)
	// The lag is the last batch's: captured after `captured`, so never more than the time since.
	if w.HitRatio != 1 || w.Replays != 100 || w.ApplyLag > time.Since(captured) {
		t.Fatalf("after warm batches: %+v", w)
	}
	a.Forget(5)
	if a.Warmth(5).Known {
		t.Fatal("Forget kept the range")
	}
}

func TestWaitWarm(t *testing.T) {
	crit := WarmCriteria{MinHitRatio: 0.9, MinReplays: 20, MaxApplyLag: time.Second}
	keys := manyKeys("hot", 40)

	t.Run("met while waiting", func(t *testing.T) {
		model := newCacheModel()
		a := newTestApplier(t, model, ApplierConfig{Workers: 1, WarmthWindow: 1})
		a.Start()
		type result struct {
			w   Warmth
			err error
			at  time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			w, err := a.WaitWarm(context.Background(), 1, crit, 10*time.Second)
			done <- result{w, err, time.Since(start)}
		}()
		// Cold first, then the same keys again: warm.
		a.Receive([]hint.RangeHints{rangeOf(1, keys...)}, time.Now())
		time.Sleep(50 * time.Millisecond)
		select {
		case r := <-done:
			t.Fatalf("returned after a cold batch: %+v %v", r.w, r.err)
		default:
		}
		a.Receive([]hint.RangeHints{rangeOf(1, keys...)}, time.Now())
		r := <-done
		if r.err != nil || r.w.HitRatio != 1 || r.at > 5*time.Second {
			t.Fatalf("WaitWarm: %+v %v after %v", r.w, r.err, r.at)
		}
	})

	t.Run("times out", func(t *testing.T) {
		model := newCacheModel()
		a := newTestApplier(t, model, ApplierConfig{Workers: 1})
		a.Start()
		a.Receive([]hint.RangeHints{rangeOf(1, keys...)}, time.Now()) // only cold replays
		eventually(t, 5*time.Second, "applied", func() bool { return a.Warmth(1).HintsApplied == 40 })
		start := time.Now()
		w, err := a.WaitWarm(context.Background(), 1, crit, 150*time.Millisecond)
		el := time.Since(start)
		if !errors.Is(err, ErrNotWarm) || !strings.Contains(err.Error(), "hit ratio 0.00") || el < 150*time.Millisecond || el > 10*time.Second {
			t.Fatalf("WaitWarm: %v after %v", err, el)
		}
		if !w.Known || w.Replays != 40 {
			t.Fatalf("last warmth seen %+v", w)
		}
	})

	t.Run("no hints at all", func(t *testing.T) {
		a := newTestApplier(t, newCacheModel(), ApplierConfig{})
		_, err := a.WaitWarm(context.Background(), 9, crit, 0)
		if !errors.Is(err, ErrNotWarm) || !strings.Contains(err.Error(), "no hints applied") {
			t.Fatalf("WaitWarm with no wait: %v", err)
		}
	})

	t.Run("context cancelled", func(t *testing.T) {
		a := newTestApplier(t, newCacheModel(), ApplierConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := a.WaitWarm(ctx, 1, crit, time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitWarm: %v", err)
		}
	})

	t.Run("lag too high", func(t *testing.T) {
		a := newTestApplier(t, newCacheModel(), ApplierConfig{Workers: 1})
		a.Start()
		stale := hint.RangeHints{RangeID: 1, CapturedAt: time.Now().Add(-3 * time.Second), Hints: pointHints(keys...)}
		a.Receive([]hint.RangeHints{stale}, time.Now())
		eventually(t, 5*time.Second, "applied", func() bool { return a.Warmth(1).Known })
		_, err := a.WaitWarm(context.Background(), 1, WarmCriteria{MaxApplyLag: time.Second}, 20*time.Millisecond)
		if !errors.Is(err, ErrNotWarm) || !strings.Contains(err.Error(), "apply lag") {
			t.Fatalf("WaitWarm: %v", err)
		}
	})
}

func TestWarmthTrackerBounded(t *testing.T) {
	tr := newWarmthTracker(4, 3)
	now := time.Now()
	for id := uint64(1); id <= 5; id++ {
		tr.record(id, now.Add(time.Duration(id)*time.Second), 0, 1, 1, ReplayStats{CacheHit: 1})
	}
	if len(tr.ranges) != 3 || tr.ranges[1] != nil || tr.ranges[2] != nil || tr.ranges[5] == nil {
		t.Fatalf("kept ranges %v, want the three most recently applied", tr.ranges)
	}
}
