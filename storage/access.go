package storage

import (
	"bytes"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BlockStats are the blocks one read loaded: their bytes (index, filter and point data blocks, as
// Pebble counts them) and the part the block cache held. A read whose InCache equals Bytes was served
// from the cache alone.
type BlockStats struct {
	Bytes, InCache uint64
}

// Hit reports whether every block the read loaded was in the cache.
func (s BlockStats) Hit() bool { return s.InCache >= s.Bytes }

// GetWithStats is Get through an iterator, so that the read's block loads are known: a prefix seek,
// which consults the bloom filters as Get does. It costs an iterator's allocation more than Get, so
// callers measure a sample of their reads with it.
func (e *Engine) GetWithStats(key []byte) (value []byte, found bool, st BlockStats, err error) {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return nil, false, st, fmt.Errorf("engine get %q: %w", key, err)
	}
	if it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key) {
		v, verr := it.ValueAndErr()
		if verr != nil {
			it.Close()
			return nil, false, st, fmt.Errorf("engine get %q: %w", key, verr)
		}
		value, found = append([]byte(nil), v...), true
	}
	st = iterBlockStats(it)
	if cerr := it.Close(); cerr != nil {
		return nil, false, st, fmt.Errorf("engine get %q: %w", key, cerr)
	}
	return value, found, st, nil
}

func iterBlockStats(it *pebble.Iterator) BlockStats {
	s := it.Stats().InternalStats
	return BlockStats{Bytes: s.BlockBytes, InCache: s.BlockBytesInCache}
}

// BlockStats are the blocks the iterator loaded so far.
func (i *Iterator) BlockStats() BlockStats { return iterBlockStats(i.it) }

// BlockBytes is the target size of the engine's data blocks (Pebble's default unless configured).
func (e *Engine) BlockBytes() int {
	if n := e.po.Levels[0].BlockSize; n > 0 {
		return n
	}
	return 4096
}

// CacheBytes is the block cache's size, memtables' reservation included (Stats.BlockCacheCapacity
// is its room for blocks).
func (e *Engine) CacheBytes() int64 { return e.po.Cache.MaxSize() }

// Offset is how many bytes of the engine's tables lie in [lo, key): a key's position within a span at
// the granularity of data blocks (Pebble estimates from the tables' indexes). Two keys whose offsets
// fall in the same block-sized slot share a block of the span's bottom level.
//
// An estimate costs disk reads: Pebble reads the properties block of each table the span partly
// overlaps from disk, outside the block cache (about 2 device reads a key, twice a get's). The
// access statistics place their sampled keys with it within a time budget a heartbeat, so on a
// busy disk few were placed (8 in 500 ms on a node serving 2 000 reads/s that miss). Estimates are
// remembered while the tables stay the same, as ApproximateBytes' are: a skewed workload samples
// its hot keys again and again.
func (e *Engine) Offset(lo, key []byte) (uint64, error) {
	if bytes.Compare(key, lo) <= 0 {
		return 0, nil
	}
	version, now := e.lsmChanges.Load(), time.Now()
	if n, ok := e.offsets.get(version, lo, key, now); ok {
		return n, nil
	}
	n, err := e.db.EstimateDiskUsage(lo, key)
	if err != nil {
		return 0, fmt.Errorf("engine offset of %q: %w", key, err)
	}
	e.offsets.put(version, lo, key, n, now)
	return n, nil
}

// TableInfo is one of the engine's tables: its level (0 the newest), number, size and user-key
// bounds (both inclusive), whether it is virtual, and, when its properties were read, the bytes of
// its index and filter blocks (IndexFilterBytes, with HasProps).
type TableInfo struct {
	Level             int
	Num, Size         uint64
	Smallest, Largest []byte
	Virtual           bool
	IndexFilterBytes  uint64
	HasProps          bool
}

// Tables lists the engine's tables whose user keys overlap [lo, hi) (every table when both are
// nil). Listing is in memory; with props it also reads each physical table's properties, a disk
// read for a table whose properties are not loaded yet, so callers read them rarely and remember
// them by table number. A virtual table's properties are Pebble's scaled estimates, without index
// and filter sizes: HasProps stays false.
func (e *Engine) Tables(lo, hi []byte, props bool) ([]TableInfo, error) {
	var opts []pebble.SSTablesOption
	if props {
		opts = append(opts, pebble.WithProperties())
	}
	if lo != nil || hi != nil {
		opts = append(opts, pebble.WithKeyRangeFilter(lo, hi))
	}
	levels, err := e.db.SSTables(opts...)
	if err != nil {
		return nil, fmt.Errorf("engine tables [%q, %q): %w", lo, hi, err)
	}
	var out []TableInfo
	for l, ts := range levels {
		for _, t := range ts {
			ti := TableInfo{Level: l, Num: uint64(t.FileNum), Size: t.Size, Smallest: t.Smallest.UserKey,
				Largest: t.Largest.UserKey, Virtual: t.Virtual}
			if props && !t.Virtual && t.Properties != nil {
				ti.IndexFilterBytes, ti.HasProps = t.Properties.IndexSize+t.Properties.FilterSize, true
			}
			out = append(out, ti)
		}
	}
	return out, nil
}
