// Package enginereader replays read hints (package hints) on a node's storage engine: the
// hints.Reader a node's module replays through. It must never write to the engine.
package enginereader

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/storage"
)

// SpanFunc reports the span [start, end) of the local replica of rangeID (an empty end: the end of
// the keyspace), whether it is the meta range (its keys live in the meta keyspace), and ok=false
// when this node holds no replica of it. The node implements it from its replicas' descriptors.
type SpanFunc func(rangeID uint64) (start, end []byte, meta, ok bool)

// Reader replays hints on a node's storage engine: a point read or a bounded scan over the same
// Pebble database, block cache and key layout that the replica's Get and Scan use, discarding the
// values. It never writes. It reports per-replay block-cache stats from Pebble's iterator stats:
// the bytes of blocks the read touched that were already in the block cache (CacheHit) and that had
// to be read from the files (CacheMiss).
type Reader struct {
	db   *pebble.DB
	span SpanFunc
}

var _ hints.Reader = (*Reader)(nil)

// New returns a Reader over eng. span bounds replays to the local replica (nil: every range is a
// user range covering the whole user keyspace — tests and tools only).
func New(eng *storage.Engine, span SpanFunc) *Reader {
	return &Reader{db: eng.DB(), span: span}
}

func (r *Reader) bounds(rangeID uint64) (start, end []byte, meta bool, err error) {
	if r.span == nil {
		return nil, nil, false, nil
	}
	start, end, meta, ok := r.span(rangeID)
	if !ok {
		return nil, nil, false, hints.ErrNoReplica
	}
	return start, end, meta, nil
}

func inSpan(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// Get implements hints.Reader: it positions on key the way a point read does (bloom filters, index and data
// block) and loads the value.
func (r *Reader) Get(ctx context.Context, rangeID uint64, key []byte) (hints.ReplayStats, error) {
	start, end, meta, err := r.bounds(rangeID)
	if err != nil {
		return hints.ReplayStats{}, err
	}
	if !inSpan(key, start, end) {
		return hints.ReplayStats{}, hints.ErrNoReplica
	}
	lo, hi := storage.DataSpan(meta, key, nil)
	hi = append(lo[:len(lo):len(lo)], 0)
	it, err := r.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return hints.ReplayStats{}, err
	}
	if it.SeekPrefixGE(lo) {
		_, _ = it.ValueAndErr()
	}
	return closeWithStats(it)
}

// Scan implements hints.Reader: the replica's scan, clamped to its span, of at most limit rows.
func (r *Reader) Scan(ctx context.Context, rangeID uint64, start, end []byte, limit int, reverse bool) (hints.ReplayStats, error) {
	rs, re, meta, err := r.bounds(rangeID)
	if err != nil {
		return hints.ReplayStats{}, err
	}
	lo, hi := start, end
	if bytes.Compare(lo, rs) < 0 {
		lo = rs
	}
	if len(re) > 0 && (len(hi) == 0 || bytes.Compare(hi, re) > 0) {
		hi = re
	}
	if len(hi) > 0 && bytes.Compare(lo, hi) >= 0 {
		return hints.ReplayStats{}, nil
	}
	elo, ehi := storage.DataSpan(meta, lo, hi)
	it, err := r.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: elo, UpperBound: ehi})
	if err != nil {
		return hints.ReplayStats{}, err
	}
	valid, step := it.First, it.Next
	if reverse {
		valid, step = it.Last, it.Prev
	}
	n := 0
	for ok := valid(); ok && n < limit; ok = step() {
		_, _ = it.ValueAndErr()
		n++
		if n%64 == 0 && ctx.Err() != nil {
			break
		}
	}
	return closeWithStats(it)
}

func closeWithStats(it *pebble.Iterator) (hints.ReplayStats, error) {
	st := it.Stats().InternalStats
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	hit := st.BlockBytesInCache
	miss := st.BlockBytes - min(hit, st.BlockBytes)
	return hints.ReplayStats{CacheHit: hit, CacheMiss: miss}, err
}
