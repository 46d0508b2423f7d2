package hints

import (
	"math"
	"time"
)

// DiskBudget bounds the disk reads that replays cause while the node's disk is the bottleneck.
//
// A replay that hits the block cache costs the node a little CPU; one that misses costs a disk read,
// which on a saturated disk is taken from the node's own clients. The load-adapted fraction
// replays a share of the hints whatever they cost, so after a join (a cold new node, old nodes
// whose caches hold ranges they gave away) most of what it replays misses, and on the
// join-surge scenario's saturated disks hints then cost 15 % of the throughput
// (docs/design/read-hints.md). The budget measures, once per Interval, which share of the
// engine's block-cache misses came from replays (live hints and warm-ups), and scales the applied
// fraction so that share stays at most Share while Saturated reports true; replays that hit cost
// nothing against it. It acts in adaptive mode only (ApplierConfig.Adaptive): a fixed fraction is
// applied as configured.
type DiskBudget struct {
	// Share is the most of the engine's block-cache misses replays may cause while the disk is
	// saturated (0: no budget).
	Share float64
	// Saturated reports whether the node's disk is the bottleneck now.
	Saturated func() bool
	// Misses is the engine's cumulative count of block-cache misses, every reader's.
	Misses func() uint64
	// Interval is how often the share is measured and the factor adjusted (default 1 s).
	Interval time.Duration
	// MinFactor is the least the fraction is scaled by (default 0.05): a trickle of replays
	// keeps the warmth of every range measurable.
	MinFactor float64
	// BlockBytes is the typical size of a block read from disk (default 4 KiB, Pebble's data
	// block): the reader reports a replay's misses in bytes, the engine counts blocks.
	BlockBytes uint64
}

func (b DiskBudget) enabled() bool { return b.Share > 0 && b.Saturated != nil && b.Misses != nil }

func (b DiskBudget) withDefaults() DiskBudget {
	if b.Interval <= 0 {
		b.Interval = time.Second
	}
	if b.MinFactor <= 0 {
		b.MinFactor = 0.05
	}
	if b.BlockBytes == 0 {
		b.BlockBytes = 4 << 10
	}
	return b
}

// missedBlocks estimates the blocks a replay read from disk: its missed bytes over BlockBytes,
// rounded up (a replay that missed at all read at least one).
func (b DiskBudget) missedBlocks(missBytes uint64) uint64 {
	if missBytes == 0 || b.BlockBytes == 0 {
		return 0
	}
	return (missBytes + b.BlockBytes - 1) / b.BlockBytes
}

// budgetState is the budget's controller; the applier's loadMu guards it.
type budgetState struct {
	at                 time.Time
	misses, replayMiss uint64 // engine misses and replays' missed blocks at the interval's start
	factor             float64
}

// minBudgetMisses is the fewest engine misses in an interval the share is judged on: below it the
// disk reads so little that replays cannot be taking much from anyone.
const minBudgetMisses = 20

// budgetFactor returns the factor the applied fraction is scaled by, adjusting it once per Interval:
// down in proportion while replays cause more than Share of the misses on a saturated disk, back up
// by half again per interval otherwise.
func (a *Applier) budgetFactor(now time.Time) float64 {
	b := a.cfg.DiskBudget
	if !b.enabled() {
		return 1
	}
	s := &a.budget
	if s.factor == 0 { // first call: start the interval at full fraction
		s.at, s.misses, s.replayMiss, s.factor = now, b.Misses(), a.c.replayMissBlocks.Load(), 1
		a.c.budgetFactor.Store(math.Float64bits(1))
		return 1
	}
	// Callers may pass a time taken a little before another caller's measurement (a worker that
	// waited for loadMu): anything short of a whole interval since the last one, earlier included,
	// keeps the factor, so an empty interval never undoes a cut.
	if now.Sub(s.at) < b.Interval {
		return s.factor
	}
	misses, replayMiss := b.Misses(), a.c.replayMissBlocks.Load()
	var dm, dr float64
	if misses >= s.misses && replayMiss >= s.replayMiss { // else a counter restarted: measure afresh
		dm, dr = float64(misses-s.misses), float64(replayMiss-s.replayMiss)
	}
	s.at, s.misses, s.replayMiss = now, misses, replayMiss
	switch share := dr / max(dm, 1); {
	case dm >= minBudgetMisses && share > b.Share && b.Saturated():
		s.factor = max(b.MinFactor, s.factor*b.Share/share)
	default:
		s.factor = min(1, s.factor*1.5)
	}
	a.c.budgetFactor.Store(math.Float64bits(s.factor))
	return s.factor
}
