package accessstats

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/shoaldb/shoal/storage"
)

// IndexFilter measures the bytes a node's block cache gives to index and filter blocks, which the
// usage model leaves out of the room for data blocks (plan/usage.HitRatio's cache).
//
// Pebble's cache counts its bytes but not by kind of block (its metrics are size, count, hits and
// misses), so the measure is the size of the index and filter blocks in the properties
// (IndexSize + FilterSize) of the tables that overlap the spans the node reads (the ranges it
// leads). Every point read of a table loads its filter block and its index (a two-level index's top
// block and one partition) beside one data block, so each is read at least as often as the
// hottest data block under it: in a cache that keeps the most read blocks, it is resident while
// the table is read at all. Tables no read reaches (a follower's) are not counted.
//
// A table's properties are one disk read from its file, so they are remembered by table number and
// read at most once every Every for the tables not yet known. Until then a table counts at the
// known tables' index and filter bytes per table byte; so do virtual tables, whose properties
// Pebble scales without their index and filter sizes.
type IndexFilter struct {
	// Every bounds how often the properties of new tables are read. Default 10 s.
	Every time.Duration

	mu    sync.Mutex
	known map[uint64]uint64  // table number → its index and filter blocks' bytes
	read  time.Time          // when properties were last read
	upper map[string]float64 // a span's start → its UpperShare, as of the last Bytes
}

// Tables lists an engine's tables overlapping [lo, hi) (storage.Engine.Tables), with their index
// and filter bytes when props.
type Tables interface {
	Tables(lo, hi []byte, props bool) ([]storage.TableInfo, error)
}

// Span is a span of engine keys [Lo, Hi).
type Span struct{ Lo, Hi []byte }

// Bytes is the index and filter bytes of eng's tables that overlap spans, at now.
func (f *IndexFilter) Bytes(eng Tables, spans []Span, now time.Time) (uint64, error) {
	if len(spans) == 0 {
		return 0, nil
	}
	all, err := eng.Tables(nil, nil, false)
	if err != nil {
		return 0, fmt.Errorf("accessstats: list tables: %w", err)
	}
	ts := Overlapping(all, spans)
	upper := make(map[string]float64, len(spans))
	for _, s := range spans {
		upper[string(s.Lo)] = UpperShare(Overlapping(ts, []Span{s}))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upper = upper
	f.forget(ts)
	if lo, hi, ok := f.unknown(ts); ok && !now.Before(f.read.Add(f.every())) {
		f.read = now
		if err := f.readProps(eng, lo, hi); err != nil {
			return 0, err
		}
	}
	return Estimate(ts, f.known), nil
}

// Upper is the UpperShare of the span starting at lo as the last Bytes listed its tables (0 when
// it was not among its spans): one listing of the tables serves every range, where each range's
// own would scan all of them.
func (f *IndexFilter) Upper(lo []byte) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.upper[string(lo)]
}

func (f *IndexFilter) every() time.Duration {
	if f.Every <= 0 {
		return 10 * time.Second
	}
	return f.Every
}

// forget drops the tables no longer among ts (compacted away), so the memo holds live tables only.
func (f *IndexFilter) forget(ts []storage.TableInfo) {
	if f.known == nil {
		f.known = map[uint64]uint64{}
	}
	live := make(map[uint64]bool, len(ts))
	for _, t := range ts {
		live[t.Num] = true
	}
	for n := range f.known {
		if !live[n] {
			delete(f.known, n)
		}
	}
}

// unknown is the span of user keys [lo, hi] that covers ts's tables whose properties are not known
// (false: none).
func (f *IndexFilter) unknown(ts []storage.TableInfo) (lo, hi []byte, ok bool) {
	for _, t := range ts {
		if _, seen := f.known[t.Num]; seen || t.Virtual {
			continue
		}
		if !ok || bytes.Compare(t.Smallest, lo) < 0 {
			lo = t.Smallest
		}
		if !ok || bytes.Compare(t.Largest, hi) > 0 {
			hi = t.Largest
		}
		ok = true
	}
	return lo, hi, ok
}

// readProps reads the properties of the physical tables overlapping [lo, hi] into the memo.
func (f *IndexFilter) readProps(eng Tables, lo, hi []byte) error {
	end := append(append([]byte(nil), hi...), 0) // hi inclusive
	m, err := ReadIndexFilter(eng, lo, end)
	for n, b := range m {
		f.known[n] = b
	}
	return err
}

// ReadIndexFilter reads the index and filter bytes of eng's physical tables overlapping the user
// keys [lo, hi) from their properties, by table number (virtual tables left out).
func ReadIndexFilter(eng Tables, lo, hi []byte) (map[uint64]uint64, error) {
	ts, err := eng.Tables(lo, hi, true)
	if err != nil {
		return nil, fmt.Errorf("accessstats: table properties: %w", err)
	}
	out := map[uint64]uint64{}
	for _, t := range ts {
		if t.HasProps {
			out[t.Num] = t.IndexFilterBytes
		}
	}
	return out, nil
}

// Overlapping is the tables of ts whose user keys overlap one of spans.
func Overlapping(ts []storage.TableInfo, spans []Span) []storage.TableInfo {
	var out []storage.TableInfo
	for _, t := range ts {
		for _, s := range spans {
			if bytes.Compare(t.Smallest, s.Hi) < 0 && bytes.Compare(t.Largest, s.Lo) >= 0 {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// Estimate is the index and filter bytes of ts: known's for the tables it knows, the known tables'
// bytes per table byte for the others (0 when it knows none).
func Estimate(ts []storage.TableInfo, known map[uint64]uint64) uint64 {
	var sum, knownSize, knownBytes, otherSize uint64
	for _, t := range ts {
		if b, ok := known[t.Num]; ok && !t.Virtual {
			sum += b
			knownSize += t.Size
			knownBytes += b
		} else {
			otherSize += t.Size
		}
	}
	if knownSize > 0 {
		sum += uint64(float64(otherSize) * float64(knownBytes) / float64(knownSize))
	}
	return sum
}

// UpperShare is the bytes of ts's tables above the deepest level among them per byte of that
// level's (0 when they all lie in one level, or none): of a range's tables, how much of its data a
// point read may find above the bottom level (Input.Upper). Tables count whole, so at the range's
// edges a table it shares with a neighbour counts in full.
func UpperShare(ts []storage.TableInfo) float64 {
	bottom := -1
	for _, t := range ts {
		bottom = max(bottom, t.Level)
	}
	var up, down uint64
	for _, t := range ts {
		if t.Level == bottom {
			down += t.Size
		} else {
			up += t.Size
		}
	}
	if down == 0 {
		return 0
	}
	return float64(up) / float64(down)
}
