package hints

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Warmth is what a receiving node knows of its cache's warmth for one range.
type Warmth struct {
	RangeID uint64
	// Known: hints were applied for the range since the node started (or since Forget).
	Known bool
	// ApplyLag is the lag of the most recent applied batch: from the capture of its oldest hint on the
	// leader to the end of its replay here.
	ApplyLag time.Duration
	// Idle is the time since the most recent batch was applied, when the report was made.
	Idle time.Duration
	// HitRatio is the block-cache hit ratio of the replays of the last few batches
	// (ApplierConfig.WarmthWindow), over Replays replays; NaN when Replays is 0. A high ratio means the
	// blocks the leader's reads touch are already cached here.
	HitRatio float64
	Replays  uint64
	// HintsApplied counts every hint replayed for the range.
	HintsApplied uint64
}

// String is a short form for logs and the decision log.
func (w Warmth) String() string {
	if !w.Known {
		return fmt.Sprintf("r%d: no hints applied", w.RangeID)
	}
	return fmt.Sprintf("r%d: hit ratio %.2f over %d replays, apply lag %v, idle %v, %d hints applied",
		w.RangeID, w.HitRatio, w.Replays, w.ApplyLag.Round(time.Millisecond), w.Idle.Round(time.Millisecond), w.HintsApplied)
}

// WarmCriteria say when a range's cache counts as warm on a node. A zero field is not checked.
type WarmCriteria struct {
	// MaxApplyLag: the most recent batch's apply lag is at most this.
	MaxApplyLag time.Duration
	// MinHitRatio: the hit ratio of recent replays is at least this, over at least MinReplays
	// replays. Set it relative to the current leader's own block-cache hit ratio (RelativeTo): with
	// data larger than the cache, no node reaches 1.
	MinHitRatio float64
	MinReplays  int
	// MaxIdle: a batch was applied at most this long ago (hints are flowing).
	MaxIdle time.Duration
}

// DefaultWarmCriteria: hints flowing (applied within 2 s, apply lag at most 1 s) with at least 16
// replays measured, and no hit-ratio bound (see RelativeTo).
func DefaultWarmCriteria() WarmCriteria {
	return WarmCriteria{MaxApplyLag: time.Second, MinReplays: 16, MaxIdle: 2 * time.Second}
}

// RelativeTo returns c with MinHitRatio set to share × leaderHitRatio: the goal is a new
// leader at ≥ 90 % of the old one's hit ratio, so RelativeTo(ratio, 0.9).
func (c WarmCriteria) RelativeTo(leaderHitRatio, share float64) WarmCriteria {
	if !math.IsNaN(leaderHitRatio) && leaderHitRatio > 0 {
		c.MinHitRatio = leaderHitRatio * share
	}
	return c
}

// ErrNotWarm is wrapped by WaitWarm's error when the wait ended before the criteria were met.
var ErrNotWarm = errors.New("cache not warm")

// Check returns nil if w meets c, or an error wrapping ErrNotWarm naming the unmet criterion.
func (c WarmCriteria) Check(w Warmth) error {
	switch {
	case !w.Known:
		return fmt.Errorf("range %d: %w: no hints applied yet", w.RangeID, ErrNotWarm)
	case c.MaxIdle > 0 && w.Idle > c.MaxIdle:
		return fmt.Errorf("range %d: %w: last hints applied %v ago (max %v)", w.RangeID, ErrNotWarm, w.Idle.Round(time.Millisecond), c.MaxIdle)
	case c.MaxApplyLag > 0 && w.ApplyLag > c.MaxApplyLag:
		return fmt.Errorf("range %d: %w: apply lag %v (max %v)", w.RangeID, ErrNotWarm, w.ApplyLag.Round(time.Millisecond), c.MaxApplyLag)
	case c.MinReplays > 0 && w.Replays < uint64(c.MinReplays):
		return fmt.Errorf("range %d: %w: %d replays measured (need %d)", w.RangeID, ErrNotWarm, w.Replays, c.MinReplays)
	case c.MinHitRatio > 0 && !(w.HitRatio >= c.MinHitRatio):
		return fmt.Errorf("range %d: %w: replay hit ratio %.2f (need %.2f)", w.RangeID, ErrNotWarm, w.HitRatio, c.MinHitRatio)
	}
	return nil
}

// warmthTracker keeps per-range warmth: a ring of the last batches' replay stats.
type warmthTracker struct {
	window, maxRanges int

	mu      sync.Mutex
	ranges  map[uint64]*rangeWarmth
	changed chan struct{} // closed and replaced on every record
}

type batchStat struct {
	stats   ReplayStats
	replays uint64
}

type rangeWarmth struct {
	lastApplied time.Time
	lag         time.Duration
	applied     uint64
	ring        []batchStat
	next        int
}

func newWarmthTracker(window, maxRanges int) *warmthTracker {
	return &warmthTracker{window: window, maxRanges: maxRanges, ranges: map[uint64]*rangeWarmth{},
		changed: make(chan struct{})}
}

func (t *warmthTracker) record(rangeID uint64, now time.Time, lag time.Duration, applied, replays uint64, st ReplayStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.ranges[rangeID]
	if w == nil {
		if len(t.ranges) >= t.maxRanges {
			t.evictOldestLocked()
		}
		w = &rangeWarmth{ring: make([]batchStat, 0, t.window)}
		t.ranges[rangeID] = w
	}
	w.lastApplied = now
	w.lag = lag
	w.applied += applied
	if replays > 0 {
		b := batchStat{stats: st, replays: replays}
		if len(w.ring) < t.window {
			w.ring = append(w.ring, b)
		} else {
			w.ring[w.next] = b
			w.next = (w.next + 1) % t.window
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *warmthTracker) evictOldestLocked() {
	var oldest uint64
	var at time.Time
	first := true
	for id, w := range t.ranges {
		if first || w.lastApplied.Before(at) {
			oldest, at, first = id, w.lastApplied, false
		}
	}
	delete(t.ranges, oldest)
}

func (t *warmthTracker) get(rangeID uint64, now time.Time) Warmth {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, _ := t.getLocked(rangeID, now)
	return w
}

func (t *warmthTracker) getLocked(rangeID uint64, now time.Time) (Warmth, <-chan struct{}) {
	out := Warmth{RangeID: rangeID, HitRatio: math.NaN()}
	w := t.ranges[rangeID]
	if w == nil {
		return out, t.changed
	}
	out.Known = true
	out.ApplyLag = w.lag
	out.Idle = max(now.Sub(w.lastApplied), 0)
	out.HintsApplied = w.applied
	var st ReplayStats
	for _, b := range w.ring {
		st = st.Add(b.stats)
		out.Replays += b.replays
	}
	out.HitRatio = st.HitRatio()
	return out, t.changed
}

func (t *warmthTracker) forget(rangeID uint64) {
	t.mu.Lock()
	delete(t.ranges, rangeID)
	t.mu.Unlock()
}

func (t *warmthTracker) wait(ctx context.Context, rangeID uint64, crit WarmCriteria, maxWait time.Duration) (Warmth, error) {
	deadline := time.Now().Add(maxWait)
	var timer *time.Timer
	for {
		t.mu.Lock()
		w, changed := t.getLocked(rangeID, time.Now())
		t.mu.Unlock()
		err := crit.Check(w)
		if err == nil {
			return w, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return w, fmt.Errorf("after waiting %v: %w", maxWait, err)
		}
		if timer == nil {
			timer = time.NewTimer(left)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return w, ctx.Err()
		}
	}
}
