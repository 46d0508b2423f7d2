// Package hotkeys keeps the hot-key summary of read hints (package hints): per range, the hottest
// read descriptors seen recently, which a restarted node (or a new replica) asks a peer for and
// replays before it may lead (warm after restart).
//
// It owns the summary's memory and nothing else: it must never read the engine or call a peer.
package hotkeys

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

// Summary keeps, per range, a bounded summary of the hottest read descriptors seen recently, with
// exponentially decayed counts. Safe for concurrent use.
//
// Decay uses a per-range landmark ("forward decay"): an observation at time t adds
// count × 2^((t − landmark)/HalfLife) to its entry, so comparing stored scores compares decayed
// counts without touching every entry; scores are renormalized when the exponent grows large.
//
// Invariant: a range holds at most 2 × PerRange entries (pruned to the PerRange hottest when it
// reaches that), and the summary's bytes stay at most MaxBytes (least recently updated ranges are
// dropped whole beyond it).
type Summary struct {
	cfg Config

	mu      sync.Mutex
	ranges  map[uint64]*hotRange
	bytes   int64
	scratch []scoredKey // pruneLocked's, kept between prunes
}

// Config bounds a Summary. Zero values take the documented defaults.
type Config struct {
	// PerRange is the number of hottest descriptors kept per range (default 256).
	PerRange int
	// HalfLife is the decay of an observation's weight (default 1 min).
	HalfLife time.Duration
	// MaxBytes bounds the whole summary: keys plus per-entry overhead (default 8 MiB).
	MaxBytes int64
}

// WithDefaults returns c with every zero setting at its default.
func (c Config) WithDefaults() Config {
	if c.PerRange <= 0 {
		c.PerRange = 256
	}
	if c.HalfLife <= 0 {
		c.HalfLife = time.Minute
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 8 << 20
	}
	return c
}

const hotEntryOverhead = 96 // map slot, entry struct, string header (approximate)

// renormalizeAt is the exponent (in half-lives since the landmark) beyond which scores are rescaled.
const renormalizeAt = 64

type hotRange struct {
	landmark time.Time
	updated  time.Time
	entries  map[uint64]*hotEntry // by descriptor hash (Hash64); a colliding descriptor is not kept
	bytes    int64
}

type hotEntry struct {
	d     hint.Descriptor
	score float64
}

// New returns an empty summary.
func New(cfg Config) *Summary {
	return &Summary{cfg: cfg.WithDefaults(), ranges: map[uint64]*hotRange{}}
}

// Config is the summary's configuration with defaults applied.
func (h *Summary) Config() Config { return h.cfg }

// Observe adds hints of rangeID seen at now (each with weight Count).
func (h *Summary) Observe(rangeID uint64, hs []hint.Hint, now time.Time) {
	h.observe(rangeID, hs, nil, now)
}

// ObserveRange is Observe of a drained or received range's hints, reusing their hashes when the
// drain or the applier computed them (RangeHints.Hashes).
func (h *Summary) ObserveRange(r hint.RangeHints, now time.Time) {
	h.observe(r.RangeID, r.Hints, r.Hashes, now)
}

// observe is Observe; hashes, if not nil, holds hs[i].Hash64() at i.
func (h *Summary) observe(rangeID uint64, hs []hint.Hint, hashes []uint64, now time.Time) {
	if len(hashes) != len(hs) {
		hashes = nil
	}
	if len(hs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.ranges[rangeID]
	if r == nil {
		r = &hotRange{landmark: now, entries: map[uint64]*hotEntry{}}
		h.ranges[rangeID] = r
	}
	if now.After(r.updated) {
		r.updated = now
	}
	exp := now.Sub(r.landmark).Seconds() / h.cfg.HalfLife.Seconds()
	if exp > renormalizeAt {
		scale := math.Exp2(-exp)
		for _, e := range r.entries {
			e.score *= scale
		}
		r.landmark, exp = now, 0
	}
	w := math.Exp2(exp)
	for i, ht := range hs {
		var k uint64
		if hashes != nil {
			k = hashes[i]
		} else {
			k = ht.Hash64()
		}
		if e, ok := r.entries[k]; ok {
			if e.d.Equal(ht.Descriptor) {
				e.score += float64(max(ht.Count, 1)) * w
			}
			// (Another descriptor with the same 64-bit hash: not tracked; the summary is a sketch.)
			continue
		}
		e := &hotEntry{d: ht.Descriptor.Clone(), score: float64(max(ht.Count, 1)) * w}
		r.entries[k] = e
		sz := int64(e.d.Size() + hotEntryOverhead)
		r.bytes += sz
		h.bytes += sz
		if len(r.entries) >= 2*h.cfg.PerRange {
			h.pruneLocked(r, h.cfg.PerRange)
		}
	}
	for h.bytes > h.cfg.MaxBytes && len(h.ranges) > 1 {
		h.evictLRULocked(rangeID)
	}
	if h.bytes > h.cfg.MaxBytes {
		// One range alone exceeds the budget: keep as many of its hottest as fit.
		keep := int(int64(len(r.entries)) * h.cfg.MaxBytes / max(r.bytes, 1))
		h.pruneLocked(r, keep)
	}
}

// pruneLocked keeps r's keep hottest entries. It selects them (average linear time) rather than
// sorting: a busy range reaches 2 × PerRange entries a few times a second, and selecting instead of
// sorting cut BenchmarkCaptureShipAll by ~8 %.
func (h *Summary) pruneLocked(r *hotRange, keep int) {
	keep = max(keep, 0)
	if len(r.entries) <= keep {
		return
	}
	all := h.scratch[:0]
	for k, e := range r.entries {
		all = append(all, scoredKey{k, e.score})
	}
	selectHottest(all, keep)
	for _, x := range all[keep:] {
		sz := int64(r.entries[x.k].d.Size() + hotEntryOverhead)
		r.bytes -= sz
		h.bytes -= sz
		delete(r.entries, x.k)
	}
	h.scratch = all[:0]
}

// scoredKey is an entry's key and score, the unit pruneLocked selects over.
type scoredKey struct {
	k     uint64
	score float64
}

// selectHottest reorders all so that its first keep elements are the keep highest scores (in no
// particular order): Hoare's quickselect with a median-of-three pivot.
func selectHottest(all []scoredKey, keep int) {
	lo, hi := 0, len(all)-1
	for lo < hi && keep > lo && keep <= hi {
		mid := lo + (hi-lo)/2
		// Median of three into all[mid], as the pivot.
		if all[mid].score > all[lo].score {
			all[mid], all[lo] = all[lo], all[mid]
		}
		if all[hi].score > all[lo].score {
			all[hi], all[lo] = all[lo], all[hi]
		}
		if all[hi].score > all[mid].score {
			all[hi], all[mid] = all[mid], all[hi]
		}
		pivot := all[mid].score
		i, j := lo, hi
		for i <= j {
			for all[i].score > pivot {
				i++
			}
			for all[j].score < pivot {
				j--
			}
			if i <= j {
				all[i], all[j] = all[j], all[i]
				i++
				j--
			}
		}
		// Now all[lo..j] >= pivot >= all[i..hi], and j < i.
		switch {
		case keep <= j:
			hi = j
		case keep >= i:
			lo = i
		default:
			return
		}
	}
}

// evictLRULocked drops the least recently updated range other than except.
func (h *Summary) evictLRULocked(except uint64) {
	var victim uint64
	var at time.Time
	found := false
	for id, r := range h.ranges {
		if id == except {
			continue
		}
		if !found || r.updated.Before(at) {
			victim, at, found = id, r.updated, true
		}
	}
	if found {
		h.bytes -= h.ranges[victim].bytes
		delete(h.ranges, victim)
	}
}

// Top returns up to limit of rangeID's hottest descriptors, hottest first, each with its decayed
// count at now (at least 1). limit <= 0: all kept. The hints own their memory.
func (h *Summary) Top(rangeID uint64, limit int, now time.Time) []hint.Hint {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.ranges[rangeID]
	if r == nil {
		return nil
	}
	all := make([]*hotEntry, 0, len(r.entries))
	for _, e := range r.entries {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *hotEntry) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return a.d.Compare(b.d)
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	decay := math.Exp2(-now.Sub(r.landmark).Seconds() / h.cfg.HalfLife.Seconds())
	out := make([]hint.Hint, len(all))
	for i, e := range all {
		c := math.Round(e.score * decay)
		c = min(max(c, 1), float64(^uint32(0)))
		out[i] = hint.Hint{Descriptor: e.d.Clone(), Count: uint32(c)}
	}
	return out
}

// Forget drops rangeID's summary.
func (h *Summary) Forget(rangeID uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.ranges[rangeID]; r != nil {
		h.bytes -= r.bytes
		delete(h.ranges, rangeID)
	}
}

// Size reports the ranges, entries and bytes the summary holds.
func (h *Summary) Size() (ranges, entries int, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ranges {
		entries += len(r.entries)
	}
	return len(h.ranges), entries, h.bytes
}
