package hints

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

// The capture buffer (the paper's read-hints buffer, RHB): two pre-allocated segments, one active.
// Readers append to the active one; the shipper swaps them and drains the other.
//
// Invariant: a writer touches a segment only between entering it (inflight+1) and leaving it
// (inflight-1), and only after seeing, once entered, that the segment is the active one. So after
// the drainer makes the other segment active and sees inflight reach 0, no writer touches the old
// segment until it becomes active again, and the drainer may read and reset it alone.
//
// Invariant: every slot below min(n, len(entries)) was written by exactly one writer in the current
// window (valid, or marked invalid when its key bytes did not fit), so the drainer reads them all.

// BufferConfig sizes a Buffer. Zero values take the documented defaults.
type BufferConfig struct {
	// FlushEntries is the number of reads after which a writer asks the shipper to flush early
	// (default 10 000, the paper's RHB capacity).
	FlushEntries int
	// Capacity is the number of entries a segment holds (default 2 × FlushEntries: the slack lets a
	// busy node keep recording while the shipper swaps). Reads beyond it are dropped (buffer_full).
	Capacity int
	// KeyBytes is the key arena of a segment (default 48 bytes × Capacity). Reads whose keys do not
	// fit are dropped (buffer_full).
	KeyBytes int
	// MaxKeyBytes is the longest key (key + scan end) recorded (default 1 KiB); longer: too_large.
	MaxKeyBytes int
	// RecurringOnly ships only reads that recur on this node: a read repeated within its batch, or
	// already recorded within RecurWindow. A read seen once is withheld (sender_one_off) and
	// remembered; when it recurs it is shipped with its count raised by the withheld read, so a
	// receiver with ApplierConfig.RecurringOnly replays it at once. The receivers' recurring-only
	// replay (the default) drops those one-off reads anyway; withholding them at the sender saves
	// their summarizing, encoding, sending and receiving. Receivers that replay everything
	// (ApplierConfig.RecurringOnly off) then get only the recurring reads.
	RecurringOnly bool
	// RecurWindow is how long a withheld read is remembered (default 2 s; one to two windows).
	RecurWindow time.Duration
	// Load, if set, is this node's load in [0, 1] (e.g. cpuload.Meter's Load), sampled at each drain. At
	// SampleAt or above the node is saturated and sheds capture work: each read is recorded with
	// probability SampleFraction (dropped ones count as sampled), until the load falls below
	// SampleResume. Hot reads recur, so they are still captured and shipped; what is lost is
	// mostly the tail, which recurring-only replay skips anyway.
	Load LoadFunc
	// SampleAt (default 0.9), SampleResume (default 0.8) and SampleFraction (default 0.5) shape
	// the sampling under load; SampleFraction 1 turns it off.
	SampleAt, SampleResume, SampleFraction float64
}

// DefaultRecurWindow is how long a read is remembered to tell whether it recurs, by the sender
// (BufferConfig.RecurWindow) and the receiver (ApplierConfig.RecurWindow) alike.
const DefaultRecurWindow = 2 * time.Second

func (c BufferConfig) withDefaults() BufferConfig {
	if c.FlushEntries <= 0 {
		c.FlushEntries = 10000
	}
	if c.Capacity <= 0 {
		c.Capacity = 2 * c.FlushEntries
	}
	if c.KeyBytes <= 0 {
		c.KeyBytes = 48 * c.Capacity
	}
	if c.MaxKeyBytes <= 0 {
		c.MaxKeyBytes = 1024
	}
	if c.RecurWindow <= 0 {
		c.RecurWindow = DefaultRecurWindow
	}
	if c.SampleAt <= 0 {
		c.SampleAt = 0.9
	}
	if c.SampleResume <= 0 {
		c.SampleResume = 0.8
	}
	if c.SampleFraction <= 0 {
		c.SampleFraction = 0.5
	}
	return c
}

// Validate reports a configuration that cannot work (after defaults).
func (c BufferConfig) Validate() error {
	c = c.withDefaults()
	if c.FlushEntries > c.Capacity {
		return fmt.Errorf("hints buffer: FlushEntries %d exceeds Capacity %d: lower FlushEntries or raise Capacity", c.FlushEntries, c.Capacity)
	}
	if c.SampleFraction > 1 || c.SampleResume > c.SampleAt {
		return fmt.Errorf("hints buffer: SampleFraction %v must be in (0, 1] and SampleResume %v at most SampleAt %v",
			c.SampleFraction, c.SampleResume, c.SampleAt)
	}
	if c.Capacity > 1<<24 || c.KeyBytes > 1<<30 {
		return fmt.Errorf("hints buffer: Capacity %d / KeyBytes %d too large (max 16Mi entries, 1 GiB)", c.Capacity, c.KeyBytes)
	}
	return nil
}

const (
	entryValid = 1 << iota
	entryScan
	entryReverse
)

// entry is one recorded read; its keys live in the segment's arena at [off, off+klen+elen).
type entry struct {
	rangeID uint64
	off     uint32
	klen    uint32
	elen    uint32
	limit   uint32
	flags   uint8
}

type segment struct {
	entries  []entry
	arena    []byte
	n        atomic.Int64 // slots reserved (may exceed len(entries): those were dropped)
	used     atomic.Int64 // arena bytes reserved (may exceed len(arena))
	inflight atomic.Int64 // writers inside the segment
	first    atomic.Int64 // monoNow of the window's first record, 0 before
}

// Buffer captures read descriptions without blocking or allocating on the read path.
// Record and RecordScan are safe for concurrent use with each other and with Drain.
type Buffer struct {
	cfg    BufferConfig
	c      *counters
	segs   [2]segment
	active atomic.Pointer[segment]
	full   chan struct{}
	// sample is the probability of recording a read, as a threshold on a random uint32; 0 records
	// every read (the node is not saturated, or there is no load signal).
	sample atomic.Uint32

	drainMu sync.Mutex // one drainer at a time
	// scratch state of Drain, reused across drains (guarded by drainMu).
	byRange map[uint64]*rangeAcc
	ids     []uint64
	// recent remembers the reads of the last one to two RecurWindows (RecurringOnly; drainMu).
	recent senderRecent
}

type rangeAcc struct {
	idx    map[uint64]int32 // descriptor hash → index in hints (collisions are checked)
	hints  []hint.Hint
	hashes []uint64
	seen   bool
}

// NewBuffer allocates both segments up front.
func NewBuffer(cfg BufferConfig) (*Buffer, error) { return newBuffer(cfg, newCounters()) }

func newBuffer(cfg BufferConfig, c *counters) (*Buffer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Buffer{cfg: cfg, c: c, full: make(chan struct{}, 1), byRange: map[uint64]*rangeAcc{}}
	for i := range b.segs {
		b.segs[i].entries = make([]entry, cfg.Capacity)
		b.segs[i].arena = make([]byte, cfg.KeyBytes)
	}
	b.active.Store(&b.segs[0])
	return b, nil
}

// Config is the buffer's configuration with defaults applied.
func (b *Buffer) Config() BufferConfig { return b.cfg }

// Full is signalled (capacity 1, never blocks the writer) when the active segment reaches
// FlushEntries: the shipper should flush now rather than at its next tick.
func (b *Buffer) Full() <-chan struct{} { return b.full }

// Metrics returns the counters the buffer shares with its module.
func (b *Buffer) Metrics() Metrics { return b.c.snapshot() }

// Record captures a point read of key in range rangeID. It copies key, never blocks, and returns
// false if the read was dropped (counted).
func (b *Buffer) Record(rangeID uint64, key []byte) bool {
	return b.record(rangeID, key, nil, 0, 0)
}

// RecordScan captures a scan of [start, end) of at most limit rows (limit <= 0: no limit).
func (b *Buffer) RecordScan(rangeID uint64, start, end []byte, limit int, reverse bool) bool {
	flags := uint8(entryScan)
	if reverse {
		flags |= entryReverse
	}
	return b.record(rangeID, start, end, hint.ClampLimit(limit), flags)
}

func (b *Buffer) record(rangeID uint64, key, end []byte, limit uint32, flags uint8) bool {
	if p := b.sample.Load(); p != 0 && rand.Uint32() >= p {
		b.c.drop(DropSampled, 1)
		return false
	}
	size := len(key) + len(end)
	if size > b.cfg.MaxKeyBytes {
		b.c.drop(DropTooLarge, 1)
		return false
	}
	for {
		s := b.active.Load()
		s.inflight.Add(1)
		if b.active.Load() != s {
			// Swapped between the load and the enter: this segment is being drained.
			s.inflight.Add(-1)
			continue
		}
		i := s.n.Add(1) - 1
		if i >= int64(len(s.entries)) {
			s.inflight.Add(-1)
			b.c.drop(DropBufferFull, 1)
			return false
		}
		if i == int64(b.cfg.FlushEntries)-1 {
			select {
			case b.full <- struct{}{}:
			default:
			}
		}
		e := &s.entries[i]
		off := s.used.Add(int64(size)) - int64(size)
		if off+int64(size) > int64(len(s.arena)) {
			e.flags = 0
			s.inflight.Add(-1)
			b.c.drop(DropBufferFull, 1)
			return false
		}
		copy(s.arena[off:], key)
		copy(s.arena[off+int64(len(key)):], end)
		*e = entry{rangeID: rangeID, off: uint32(off), klen: uint32(len(key)), elen: uint32(len(end)),
			limit: limit, flags: flags | entryValid}
		if s.first.Load() == 0 {
			s.first.CompareAndSwap(0, monoNow())
		}
		s.inflight.Add(-1)
		return true
	}
}

// Drain swaps the segments and returns the drained one's reads, grouped per range (ascending range
// id) with duplicates summarized into one hint with a count, in order of first occurrence. The
// returned hints own their memory. Drains are serialized; Record never waits for one.
func (b *Buffer) Drain() []hint.RangeHints { return b.drain(nil) }

// drainPaceEvery is how many entries the drain summarizes between looks at its pacer's clock.
const drainPaceEvery = 32

// drain is Drain, pausing per p between slices of its work (nil: never).
func (b *Buffer) drain(p *pacer) []hint.RangeHints {
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
	b.refreshSampling()
	old := b.active.Load()
	next := &b.segs[0]
	if old == next {
		next = &b.segs[1]
	}
	b.active.Store(next)
	for old.inflight.Load() != 0 {
		runtime.Gosched()
	}
	n := old.n.Load()
	if n > int64(len(old.entries)) {
		n = int64(len(old.entries))
	}
	first := old.first.Load()
	out := b.summarize(old, int(n), first, p)
	old.n.Store(0)
	old.used.Store(0)
	old.first.Store(0)
	return out
}

func (b *Buffer) summarize(s *segment, n int, first int64, p *pacer) []hint.RangeHints {
	recorded, distinct := b.accumulate(s, n, p)
	b.c.recorded.Add(uint64(recorded))
	b.c.summarized.Add(uint64(recorded - distinct))
	if distinct == 0 {
		b.resetScratch()
		return nil
	}
	if b.cfg.RecurringOnly {
		b.recent.rotate(monoNow(), int64(b.cfg.RecurWindow))
	}
	ids := b.ids[:0]
	for id, acc := range b.byRange {
		if len(acc.hints) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b.ids = ids
	kept, keyBytes := b.keep(ids)
	out := b.copyOut(ids, monoTime(first), kept, keyBytes)
	b.resetScratch()
	return out
}

// accumulate counts the segment's first n entries into the per-range accumulators, one hint per
// distinct descriptor; it returns the valid entries and the distinct hints among them.
func (b *Buffer) accumulate(s *segment, n int, p *pacer) (recorded, distinct int) {
	for i := 0; i < n; i++ {
		if i%drainPaceEvery == drainPaceEvery-1 {
			p.pace()
		}
		e := &s.entries[i]
		if e.flags&entryValid == 0 {
			continue
		}
		recorded++
		acc := b.byRange[e.rangeID]
		if acc == nil {
			acc = &rangeAcc{idx: map[uint64]int32{}}
			b.byRange[e.rangeID] = acc
		}
		acc.seen = true
		d := s.descriptor(e)
		h := d.Hash64()
		if j, ok := acc.idx[h]; ok && acc.hints[j].Descriptor.Equal(d) {
			if acc.hints[j].Count < ^uint32(0) {
				acc.hints[j].Count++
			}
			continue
		} else if !ok {
			acc.idx[h] = int32(len(acc.hints))
		}
		// (A hash collision with another descriptor: this one is kept as its own hint, unindexed.)
		acc.hints = append(acc.hints, hint.Hint{Descriptor: d, Count: 1})
		acc.hashes = append(acc.hashes, h)
		distinct++
	}
	return recorded, distinct
}

// keep keeps the ranges' hints, withholding one-off reads when RecurringOnly, and sizes their copy:
// the hints kept and the bytes of their keys.
func (b *Buffer) keep(ids []uint64) (kept, keyBytes int) {
	withheld := 0
	for _, id := range ids {
		acc := b.byRange[id]
		if !b.cfg.RecurringOnly {
			kept += len(acc.hints)
			for _, h := range acc.hints {
				keyBytes += len(h.Key) + len(h.End)
			}
			continue
		}
		k := 0
		for j, h := range acc.hints {
			if !b.recent.ship(recentKey(acc.hashes[j], id), &h) {
				withheld++
				continue
			}
			acc.hints[k], acc.hashes[k] = h, acc.hashes[j]
			k++
			keyBytes += len(h.Key) + len(h.End)
		}
		acc.hints = acc.hints[:k]
		kept += k
	}
	b.c.drop(DropSenderOneOff, uint64(withheld))
	return kept, keyBytes
}

// copyOut copies the kept hints of ranges ids out of the segment's arena, which the next window
// reuses, into one arena of their own.
func (b *Buffer) copyOut(ids []uint64, captured time.Time, kept, keyBytes int) []hint.RangeHints {
	arena := make([]byte, 0, keyBytes)
	hints := make([]hint.Hint, 0, kept)
	hashes := make([]uint64, 0, kept)
	out := make([]hint.RangeHints, 0, len(ids))
	for _, id := range ids {
		acc := b.byRange[id]
		start := len(hints)
		hashes = append(hashes, acc.hashes[:len(acc.hints)]...)
		for _, h := range acc.hints {
			// Copy the keys out of the segment's arena, which the next window reuses.
			k := len(arena)
			arena = append(arena, h.Key...)
			h.Key = arena[k:len(arena):len(arena)]
			if h.End != nil {
				k = len(arena)
				arena = append(arena, h.End...)
				h.End = arena[k:len(arena):len(arena)]
			}
			hints = append(hints, h)
		}
		// A range whose reads were all withheld still gets an (empty) entry: it tells the receivers
		// that hints flow and nothing recurred, so its warmth does not go idle.
		out = append(out, hint.RangeHints{RangeID: id, CapturedAt: captured, Hints: hints[start:len(hints):len(hints)],
			Hashes: hashes[start:len(hashes):len(hashes)]})
	}
	return out
}

// resetScratch empties the per-range accumulators, keeping those of ranges seen in this drain (they
// are likely to be seen again) and forgetting the others, so the scratch stays bounded by the
// ranges of one window.
func (b *Buffer) resetScratch() {
	for id, acc := range b.byRange {
		if !acc.seen {
			delete(b.byRange, id)
			continue
		}
		acc.seen = false
		clear(acc.idx)
		clear(acc.hints)
		acc.hints = acc.hints[:0]
		acc.hashes = acc.hashes[:0]
	}
}

// refreshSampling samples the load (BufferConfig.Load) and sets the capture probability: every
// read below SampleAt, SampleFraction of them from SampleAt until the load falls below
// SampleResume.
func (b *Buffer) refreshSampling() {
	if b.cfg.Load == nil || b.cfg.SampleFraction >= 1 {
		return
	}
	load := b.cfg.Load()
	if math.IsNaN(load) {
		load = 0
	}
	b.c.captureLoad.Store(math.Float64bits(load))
	sampling := b.sample.Load() != 0
	switch {
	case load >= b.cfg.SampleAt:
		sampling = true
	case load < b.cfg.SampleResume:
		sampling = false
	}
	if !sampling {
		b.sample.Store(0)
		b.c.captureFraction.Store(math.Float64bits(1))
		return
	}
	b.sample.Store(uint32(max(b.cfg.SampleFraction*(1<<32), 1)))
	b.c.captureFraction.Store(math.Float64bits(b.cfg.SampleFraction))
}

// sampling reports whether the buffer records only a sample of the reads now (the load was at
// SampleAt or above at the last drain, and has not fallen below SampleResume since).
func (b *Buffer) sampling() bool { return b.sample.Load() != 0 }

// CaptureFraction is the share of reads recorded now (below 1 while the node sheds capture work
// under load).
func (b *Buffer) CaptureFraction() float64 { return math.Float64frombits(b.c.captureFraction.Load()) }

// recentKey mixes a descriptor hash with its range (the same read in two ranges is two reads).
func recentKey(h, rangeID uint64) uint64 { return h ^ (rangeID * 0x9e3779b97f4a7c15) }

// senderRecent remembers the reads recorded in the current and the previous window, and whether
// each was shipped (for BufferConfig.RecurringOnly). Used by the drainer alone.
type senderRecent struct {
	cur, prev map[uint64]bool // read → shipped
	since     int64           // monoNow of cur's start
}

func (r *senderRecent) rotate(now, window int64) {
	if r.cur != nil && now-r.since < window && len(r.cur) < maxRecentReads {
		return
	}
	if r.cur != nil && now-r.since < 2*window {
		r.prev = r.cur
	} else {
		r.prev = nil
	}
	r.cur, r.since = make(map[uint64]bool, len(r.prev)), now
}

// ship records read k (hint h of the current batch) and reports whether to ship it: it recurred in
// the batch, or was recorded within the last one to two windows. A read withheld before is shipped
// with its count raised by one (the withheld read), so that a recurring-only receiver, which never
// saw it, replays it.
func (r *senderRecent) ship(k uint64, h *hint.Hint) bool {
	shipped, seen := r.cur[k]
	if !seen {
		shipped, seen = r.prev[k]
	}
	switch {
	case h.Count > 1:
	case !seen:
		r.cur[k] = false
		return false
	case !shipped:
		h.Count++
	}
	r.cur[k] = true
	return true
}

// descriptor views entry e's keys in the arena (valid until the segment is reset).
func (s *segment) descriptor(e *entry) hint.Descriptor {
	k := s.arena[e.off : e.off+e.klen : e.off+e.klen]
	d := hint.Descriptor{Key: k, Limit: e.limit, Scan: e.flags&entryScan != 0, Reverse: e.flags&entryReverse != 0}
	if d.Scan {
		end := e.off + e.klen
		d.End = s.arena[end : end+e.elen : end+e.elen]
	}
	return d
}
