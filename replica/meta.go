package replica

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// MetaRangeID is the id of the meta range, which holds every user range's descriptor.
const MetaRangeID = 1

// FirstUserRangeID is the id of the user range a new cluster starts with.
const FirstUserRangeID = 2

// Keys of the meta range's keyspace.
//
//	'd' 0x01 <end key>   descriptor of the user range ending at <end key>
//	'd' 0x02             descriptor of the user range ending at +infinity
//	'n' <node id:8>      node descriptor
//	'c' <name>           counters (range ids, node ids)
//
// Keying descriptors by end key makes "the range containing k" one seek: the first key > 'd' 0x01 k.

// MetaDescKey is the meta key of the descriptor of the range ending at end (empty = +inf).
func MetaDescKey(end []byte) []byte {
	if len(end) == 0 {
		return []byte{'d', 0x02}
	}
	return append([]byte{'d', 0x01}, end...)
}

// MetaLookupKey is the key after which the descriptor of the range containing key is found.
func MetaLookupKey(key []byte) []byte { return append([]byte{'d', 0x01}, key...) }

// MetaDescSpan is the span of every descriptor key.
func MetaDescSpan() (start, end []byte) { return []byte{'d'}, []byte{'e'} }

// MetaNodeKey is the meta key of a node descriptor.
func MetaNodeKey(nodeID uint64) []byte { return append([]byte{'n'}, u64(nodeID)...) }

// MetaNodeSpan is the span of every node descriptor.
func MetaNodeSpan() (start, end []byte) { return []byte{'n'}, []byte{'o'} }

// MetaCounterKey is the meta key of a named counter.
func MetaCounterKey(name string) []byte { return append([]byte{'c'}, name...) }

// applyMetaDescriptor writes d unless a descriptor of the same or a newer generation is stored.
func applyMetaDescriptor(b *storage.Batch, d *pb.RangeDescriptor) error {
	k := storage.MetaDataKey(MetaDescKey(d.EndKey))
	if v, ok, err := b.Get(k); err != nil {
		return err
	} else if ok {
		old := &pb.RangeDescriptor{}
		if err := proto.Unmarshal(v, old); err != nil {
			return fmt.Errorf("meta: decode descriptor: %w", err)
		}
		if old.Generation >= d.Generation && !(old.RangeId == d.RangeId && bytes.Equal(old.StartKey, d.StartKey) && old.Generation == d.Generation) {
			return nil
		}
	} else if covered, err := coveredByNewer(b, d); err != nil || covered {
		// A stale descriptor of a range that has since been merged away must not come back.
		return err
	}
	// Entries ending inside d's span describe ranges d absorbed (a merge): drop the older ones.
	lo := storage.MetaDataKey(MetaDescKey(d.StartKey))
	if len(d.StartKey) == 0 {
		lo = storage.MetaDataKey([]byte{'d', 0x01})
	}
	it, err := b.NewIter(append(lo, 0), k)
	if err != nil {
		return err
	}
	var stale [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		old := &pb.RangeDescriptor{}
		if err := proto.Unmarshal(it.Value(), old); err != nil {
			_ = it.Close()
			return fmt.Errorf("meta: decode descriptor: %w", err)
		}
		if old.Generation < d.Generation {
			stale = append(stale, append([]byte(nil), it.Key()...))
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, sk := range stale {
		if err := b.Delete(sk); err != nil {
			return err
		}
	}
	data, err := proto.Marshal(d)
	if err != nil {
		return err
	}
	return b.Set(k, data)
}

// coveredByNewer reports whether the meta range holds a newer descriptor whose span contains d's.
func coveredByNewer(b *storage.Batch, d *pb.RangeDescriptor) (bool, error) {
	_, hi := MetaDescSpan()
	it, err := b.NewIter(append(storage.MetaDataKey(MetaDescKey(d.EndKey)), 0), storage.MetaDataKey(hi))
	if err != nil {
		return false, err
	}
	defer it.Close()
	if len(d.EndKey) == 0 || !it.First() {
		return false, nil
	}
	next := &pb.RangeDescriptor{}
	if err := proto.Unmarshal(it.Value(), next); err != nil {
		return false, fmt.Errorf("meta: decode descriptor: %w", err)
	}
	return next.Generation > d.Generation && bytes.Compare(next.StartKey, d.StartKey) <= 0, nil
}
