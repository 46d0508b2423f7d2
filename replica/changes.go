package replica

import (
	"github.com/shoaldb/shoal/pb"
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
	r.changes = append(r.changes, &pb.RangeFeedEvent{Kind: kind, RangeId: r.rangeID, Index: r.applyingIndex,
		Key: key, Value: v.Data, ExpireAtUnixMs: v.ExpireAtMs, Version: v.Version})
}

// recordSpan records a split or merge at the entry being applied.
func (r *Replica) recordSpan(kind pb.RangeFeedEvent_Kind, desc, right *pb.RangeDescriptor) {
	if r.store.cfg.Changes == nil || r.IsMeta() {
		return
	}
	r.changes = append(r.changes, &pb.RangeFeedEvent{Kind: kind, RangeId: r.rangeID, Index: r.applyingIndex, Desc: desc, Right: right})
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
