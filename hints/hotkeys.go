package hints

import (
	"math"
	"sort"
	"sync"
	"time"
)

// HotKeys keeps, per range, a bounded summary of the hottest read descriptors seen recently, with
// exponentially decayed counts: what a restarted node (or a new replica) asks a peer for and replays
// before it may lead (warm after restart).
//
// Decay uses a per-range landmark ("forward decay"): an observation at time t adds
// count × 2^((t − landmark)/HalfLife) to its entry, so comparing stored scores compares decayed
// counts without touching every entry; scores are renormalized when the exponent grows large.
//
// Invariant: a range holds at most 2 × PerRange entries (pruned to the PerRange hottest when it
// reaches that), and the summary's bytes stay at most MaxBytes (least recently updated ranges are
// dropped whole beyond it).
type HotKeys struct {
	cfg HotKeysConfig

	mu     sync.Mutex
	ranges map[uint64]*hotRange
	bytes  int64
}

// HotKeysConfig bounds a HotKeys summary. Zero values take the documented defaults.
type HotKeysConfig struct {
	// PerRange is the number of hottest descriptors kept per range (default 256).
	PerRange int
	// HalfLife is the decay of an observation's weight (default 1 min).
	HalfLife time.Duration
	// MaxBytes bounds the whole summary: keys plus per-entry overhead (default 8 MiB).
	MaxBytes int64
}

func (c HotKeysConfig) withDefaults() HotKeysConfig {
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
	entries  map[uint64]*hotEntry // by descriptor hash (hash64); a colliding descriptor is not kept
	bytes    int64
}

type hotEntry struct {
	d     Descriptor
	score float64
}

// NewHotKeys returns an empty summary.
func NewHotKeys(cfg HotKeysConfig) *HotKeys {
	return &HotKeys{cfg: cfg.withDefaults(), ranges: map[uint64]*hotRange{}}
}

// Config is the summary's configuration with defaults applied.
func (h *HotKeys) Config() HotKeysConfig { return h.cfg }

// Observe adds hints of rangeID seen at now (each with weight Count).
func (h *HotKeys) Observe(rangeID uint64, hs []Hint, now time.Time) {
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
	for _, hint := range hs {
		k := hint.hash64()
		if e, ok := r.entries[k]; ok {
			if e.d.Equal(hint.Descriptor) {
				e.score += float64(max(hint.Count, 1)) * w
			}
			// (Another descriptor with the same 64-bit hash: not tracked; the summary is a sketch.)
			continue
		}
		e := &hotEntry{d: hint.Descriptor.clone(), score: float64(max(hint.Count, 1)) * w}
		r.entries[k] = e
		sz := int64(e.d.size() + hotEntryOverhead)
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

// pruneLocked keeps r's keep hottest entries.
func (h *HotKeys) pruneLocked(r *hotRange, keep int) {
	if len(r.entries) <= keep {
		return
	}
	type kv struct {
		k uint64
		e *hotEntry
	}
	all := make([]kv, 0, len(r.entries))
	for k, e := range r.entries {
		all = append(all, kv{k, e})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].e.score > all[j].e.score })
	for _, x := range all[max(keep, 0):] {
		sz := int64(x.e.d.size() + hotEntryOverhead)
		r.bytes -= sz
		h.bytes -= sz
		delete(r.entries, x.k)
	}
}

// evictLRULocked drops the least recently updated range other than except.
func (h *HotKeys) evictLRULocked(except uint64) {
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
func (h *HotKeys) Top(rangeID uint64, limit int, now time.Time) []Hint {
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
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return string(all[i].d.identity(nil)) < string(all[j].d.identity(nil))
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	decay := math.Exp2(-now.Sub(r.landmark).Seconds() / h.cfg.HalfLife.Seconds())
	out := make([]Hint, len(all))
	for i, e := range all {
		c := math.Round(e.score * decay)
		c = min(max(c, 1), float64(^uint32(0)))
		out[i] = Hint{Descriptor: e.d.clone(), Count: uint32(c)}
	}
	return out
}

// Forget drops rangeID's summary.
func (h *HotKeys) Forget(rangeID uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.ranges[rangeID]; r != nil {
		h.bytes -= r.bytes
		delete(h.ranges, rangeID)
	}
}

// Size reports the ranges, entries and bytes the summary holds.
func (h *HotKeys) Size() (ranges, entries int, bytes int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ranges {
		entries += len(r.entries)
	}
	return len(h.ranges), entries, h.bytes
}
