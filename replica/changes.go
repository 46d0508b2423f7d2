package replica

import (
	"bytes"
	"fmt"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
)

// ChangeSink receives what the node's user ranges apply, the source of their change streams (package
// kv/rangefeed). The meta range reports nothing.
//
// Its methods run on the raft loop, most with the replica's lock held: they must not block, and must
// never call back into the replica or the store.
type ChangeSink interface {
	// Applied hands over the changes of entries applied in one batch, after the batch committed, in
	// apply order (PUT, DELETE, EXPIRE, SPLIT and MERGE events with RangeId and Index set); applied is
	// the replica's applied index after the batch. The events are the sink's: the replica keeps no
	// reference.
	Applied(rangeID uint64, events []*pb.RangeFeedEvent, applied uint64)
	// Reset says that the replica applies after index from now on and that this node holds none of
	// the range's changes at or below heldFrom (heldFrom 0: the replica was created by a split, so
	// its whole history is to come). desc is nil for a replica with no data yet.
	Reset(rangeID uint64, desc *pb.RangeDescriptor, index, heldFrom uint64)
	// Removed says that the replica left the node: desc is its last descriptor (MergingInto set if
	// a merge absorbed it).
	Removed(rangeID uint64, desc *pb.RangeDescriptor)
}

// recordChange is eval's Record for this replica: one event of the entry being applied.
func (r *Replica) recordChange(kind pb.RangeFeedEvent_Kind, key []byte, v stored.Value) {
	r.changes = append(r.changes, &pb.RangeFeedEvent{Kind: kind, RangeId: r.rangeID, Index: r.applyingIndex, Seq: r.nextSeq(),
		Key: key, Value: v.Data, ExpireAtUnixMs: v.ExpireAtMs, Version: v.Version})
}

// nextSeq numbers the changes of the entry being applied: one key may change twice in one entry
// (an EXPIRE then a PUT, a delete then a put in one batch), and a reader needs both.
func (r *Replica) nextSeq() uint32 {
	if n := len(r.changes); n > 0 && r.changes[n-1].Index == r.applyingIndex {
		return r.changes[n-1].Seq + 1
	}
	return 0
}

// recordSpan records a split or merge at the entry being applied.
func (r *Replica) recordSpan(kind pb.RangeFeedEvent_Kind, desc, right *pb.RangeDescriptor) {
	if r.store.cfg.Changes == nil || r.IsMeta() {
		return
	}
	r.changes = append(r.changes, &pb.RangeFeedEvent{Kind: kind, RangeId: r.rangeID, Index: r.applyingIndex, Seq: r.nextSeq(), Desc: desc, Right: right})
}

// publishChangesLocked hands the batch's changes to the sink once the batch has committed.
func (r *Replica) publishChangesLocked() {
	sink := r.store.cfg.Changes
	if sink == nil || r.IsMeta() {
		return
	}
	evs := r.changes
	r.changes = nil
	sink.Applied(r.rangeID, evs, r.applied)
}

// resetChanges tells the sink where this replica's history starts.
func (s *Store) resetChanges(r *Replica, desc *pb.RangeDescriptor, index, heldFrom uint64) {
	if s.cfg.Changes != nil && !r.IsMeta() {
		s.cfg.Changes.Reset(r.rangeID, desc, index, heldFrom)
	}
}

// removedChanges tells the sink that r left the node.
func (s *Store) removedChanges(r *Replica, desc *pb.RangeDescriptor) {
	if s.cfg.Changes != nil && !r.IsMeta() {
		s.cfg.Changes.Removed(r.rangeID, desc)
	}
}

// SpanSnapshot is part of a range's data as it was at one applied index: the initial scan of a
// change stream, which goes on from that index.
type SpanSnapshot struct {
	Index  uint64
	snap   *storage.Snapshot
	lo, hi []byte
	clock  int64
}

// SnapshotSpan captures [start, end) ∩ the range's span at the replica's applied index (taken
// between two applies, so the data and the index agree). atIndex, if set, runs with the index
// before the next apply (to pin the change stream there); its error is SnapshotSpan's. Close the
// snapshot when done.
func (r *Replica) SnapshotSpan(start, end []byte, atIndex func(index uint64) error) (*SpanSnapshot, error) {
	if r.IsMeta() {
		return nil, &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: "the meta range has no change stream"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.checkUsableLocked(); e != nil {
		return nil, e
	}
	d := r.desc
	lo, hi := start, end
	if bytes.Compare(lo, d.StartKey) < 0 {
		lo = d.StartKey
	}
	if len(d.EndKey) > 0 && (len(hi) == 0 || bytes.Compare(hi, d.EndKey) > 0) {
		hi = d.EndKey
	}
	if atIndex != nil {
		if err := atIndex(r.applied); err != nil {
			return nil, err
		}
	}
	elo, ehi := storage.DataSpan(false, lo, hi)
	return &SpanSnapshot{Index: r.applied, snap: r.store.eng.NewSnapshot(), lo: elo, hi: ehi, clock: r.ClockMs()}, nil
}

// Each calls fn with every key live at the snapshot's index (judged at the replica's clock when it
// was taken) and its value; key and value are fn's.
func (s *SpanSnapshot) Each(fn func(key []byte, v stored.Value) error) error {
	if bytes.Compare(s.lo, s.hi) >= 0 {
		return nil
	}
	it, err := s.snap.NewIter(s.lo, s.hi)
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, live, err := stored.Live(append([]byte(nil), it.Value()...), s.clock)
		if err != nil {
			return fmt.Errorf("key %q: %w", it.Key(), err)
		}
		if live {
			if err := fn(append([]byte(nil), storage.StripDataPrefix(it.Key())...), v); err != nil {
				return err
			}
		}
	}
	return it.Error()
}

// Close releases the snapshot.
func (s *SpanSnapshot) Close() error { return s.snap.Close() }
