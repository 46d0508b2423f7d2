package hints

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
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
}

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
	return c
}

// Validate reports a configuration that cannot work (after defaults).
func (c BufferConfig) Validate() error {
	c = c.withDefaults()
	if c.FlushEntries > c.Capacity {
		return fmt.Errorf("hints buffer: FlushEntries %d exceeds Capacity %d: lower FlushEntries or raise Capacity", c.FlushEntries, c.Capacity)
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

	drainMu sync.Mutex // one drainer at a time
	// scratch state of Drain, reused across drains (guarded by drainMu).
	byRange map[uint64]*rangeAcc
	ident   []byte
}

type rangeAcc struct {
	idx   map[string]int
	hints []Hint
	seen  bool
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
	return b.record(rangeID, start, end, clampLimit(limit), flags)
}

func (b *Buffer) record(rangeID uint64, key, end []byte, limit uint32, flags uint8) bool {
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
func (b *Buffer) Drain() []RangeHints {
	b.drainMu.Lock()
	defer b.drainMu.Unlock()
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
	out := b.summarize(old, int(n), first)
	old.n.Store(0)
	old.used.Store(0)
	old.first.Store(0)
	return out
}

func (b *Buffer) summarize(s *segment, n int, first int64) []RangeHints {
	var recorded, distinct, keyBytes int
	for i := 0; i < n; i++ {
		e := &s.entries[i]
		if e.flags&entryValid == 0 {
			continue
		}
		recorded++
		acc := b.byRange[e.rangeID]
		if acc == nil {
			acc = &rangeAcc{idx: map[string]int{}}
			b.byRange[e.rangeID] = acc
		}
		acc.seen = true
		d := s.descriptor(e)
		b.ident = d.identity(b.ident[:0])
		if j, ok := acc.idx[string(b.ident)]; ok {
			if acc.hints[j].Count < ^uint32(0) {
				acc.hints[j].Count++
			}
			continue
		}
		acc.idx[string(b.ident)] = len(acc.hints)
		acc.hints = append(acc.hints, Hint{Descriptor: d, Count: 1})
		distinct++
		keyBytes += int(e.klen + e.elen)
	}
	b.c.recorded.Add(uint64(recorded))
	b.c.summarized.Add(uint64(recorded - distinct))
	if distinct == 0 {
		b.resetScratch()
		return nil
	}
	captured := monoTime(first)
	arena := make([]byte, 0, keyBytes)
	hints := make([]Hint, 0, distinct)
	ids := make([]uint64, 0, len(b.byRange))
	for id, acc := range b.byRange {
		if len(acc.hints) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]RangeHints, 0, len(ids))
	for _, id := range ids {
		acc := b.byRange[id]
		start := len(hints)
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
		out = append(out, RangeHints{RangeID: id, CapturedAt: captured, Hints: hints[start:len(hints):len(hints)]})
	}
	b.resetScratch()
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
	}
}

// descriptor views entry e's keys in the arena (valid until the segment is reset).
func (s *segment) descriptor(e *entry) Descriptor {
	k := s.arena[e.off : e.off+e.klen : e.off+e.klen]
	d := Descriptor{Key: k, Limit: e.limit, Scan: e.flags&entryScan != 0, Reverse: e.flags&entryReverse != 0}
	if d.Scan {
		end := e.off + e.klen
		d.End = s.arena[end : end+e.elen : end+e.elen]
	}
	return d
}
