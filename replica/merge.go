package replica

// Range merges (see docs/design/merge.md). One Pebble engine holds every range of a node in one user
// keyspace, so a merge moves no data: it is descriptor and raft-state surgery, made safe by three
// replicated steps whose order each range's raft log fixes:
//
//  1. FreezeForMerge on the right range: from its apply index F on, the right range serves no reads
//     and applies no command but an unfreeze (the frozen descriptor carries merging_into and F, so
//     snapshots and restarts keep the freeze).
//  2. The coordinator waits until every right replica has applied F (WaitApplied), so each node's
//     engine holds the right range's final data.
//  3. MergeTrigger on the left range: every left replica widens its span and retires the local
//     right replica's raft state. It applies only if the left descriptor is still the one the merge
//     was planned on and both ranges have replicas on the same nodes.
//
// An abandoned merge is undone by MergeAbort on the left range, which bumps the left generation so
// any trigger still in flight can never apply; only then is the right range unfrozen.

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// Frozen reports whether the range is frozen for a merge, and into which range.
func (r *Replica) Frozen() (into uint64, freezeIndex uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.desc == nil {
		return 0, 0
	}
	return r.desc.MergingInto, r.desc.FreezeIndex
}

// Applied is the replica's applied index.
func (r *Replica) Applied() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

func (r *Replica) frozenErrLocked() *Error {
	if r.desc == nil || r.desc.MergingInto == 0 {
		return nil
	}
	return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d is frozen for a merge into range %d; retry", r.rangeID, r.desc.MergingInto)}
}

// mergeProtocolCommand reports whether cmd may be proposed and applied on a frozen range.
func mergeProtocolCommand(cmd *pb.Command) bool {
	return cmd.Freeze != nil || cmd.Unfreeze != nil
}

// sameNodes reports whether a and b have replicas on the same nodes with the same roles.
func sameNodes(a, b *pb.RangeDescriptor) bool {
	key := func(d *pb.RangeDescriptor) []string {
		out := make([]string, 0, len(d.Replicas))
		for _, rd := range d.Replicas {
			out = append(out, fmt.Sprintf("%d/%t", rd.NodeId, rd.Learner))
		}
		sort.Strings(out)
		return out
	}
	ka, kb := key(a), key(b)
	if len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if ka[i] != kb[i] {
			return false
		}
	}
	return true
}

// SameNodes reports whether two descriptors have replicas on the same nodes with the same roles (the
// precondition of a merge).
func SameNodes(a, b *pb.RangeDescriptor) bool { return sameNodes(a, b) }

// applyMergeProtocol applies the merge-protocol commands. handled is false for any other command.
// On a frozen range every other command is refused (deterministically: the freeze is replicated).
func (r *Replica) applyMergeProtocol(b *storage.Batch, cmd *pb.Command, index uint64) (res Result, mergedRight uint64, handled bool, err error) {
	stale := func(what string) Result {
		return Result{Err: &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("range %d: %s", r.rangeID, what), Desc: r.descCopyLocked()}}
	}
	if r.IsMeta() && (cmd.Freeze != nil || cmd.Unfreeze != nil || cmd.Merge != nil || cmd.MergeAbort != nil) {
		return Result{Err: &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: "the meta range does not merge"}}, 0, true, nil
	}
	switch {
	case cmd.Freeze != nil:
		f := cmd.Freeze
		if r.desc.MergingInto != 0 {
			// Never hand an existing freeze to a second coordinator: it may be being aborted, and a
			// trigger built on it could apply after the unfreeze.
			return stale(fmt.Sprintf("already frozen (at %d) for a merge into range %d", r.desc.FreezeIndex, r.desc.MergingInto)), 0, true, nil
		}
		if r.desc.Generation != f.Generation {
			return stale(fmt.Sprintf("freeze planned on generation %d, range is at %d", f.Generation, r.desc.Generation)), 0, true, nil
		}
		d := proto.Clone(r.desc).(*pb.RangeDescriptor)
		d.MergingInto, d.FreezeIndex = f.LeftRangeId, index
		d.Generation++
		r.desc = d
		if err := r.writeDescLocked(b); err != nil {
			return Result{}, 0, true, err
		}
		return Result{Index: index}, 0, true, nil

	case cmd.Unfreeze != nil:
		if r.desc.MergingInto == 0 {
			return Result{}, 0, true, nil
		}
		if r.desc.MergingInto != cmd.Unfreeze.LeftRangeId || r.desc.FreezeIndex != cmd.Unfreeze.FreezeIndex {
			// An unfreeze undoes one freeze only: a late one must not thaw a newer freeze.
			return stale(fmt.Sprintf("frozen at %d for range %d, not at %d for %d", r.desc.FreezeIndex, r.desc.MergingInto,
				cmd.Unfreeze.FreezeIndex, cmd.Unfreeze.LeftRangeId)), 0, true, nil
		}
		d := proto.Clone(r.desc).(*pb.RangeDescriptor)
		d.MergingInto, d.FreezeIndex = 0, 0
		d.Generation++
		r.desc = d
		if err := r.writeDescLocked(b); err != nil {
			return Result{}, 0, true, err
		}
		return Result{}, 0, true, nil
	}

	if fe := r.frozenErrLocked(); fe != nil {
		return Result{Err: fe}, 0, true, nil
	}

	switch {
	case cmd.Merge != nil:
		mt := cmd.Merge
		left, right, merged := mt.Left, mt.Right, mt.Merged
		if left == nil || right == nil || merged == nil {
			return stale("malformed merge trigger"), 0, true, nil
		}
		if r.desc.Generation != left.Generation || !bytes.Equal(r.desc.EndKey, right.StartKey) || len(r.desc.EndKey) == 0 {
			return stale("merge planned on a stale descriptor"), 0, true, nil
		}
		if len(r.desc.Fences) > 0 || len(right.Fences) > 0 {
			return stale("a range with a span fence does not merge"), 0, true, nil
		}
		if right.MergingInto != r.rangeID || right.FreezeIndex == 0 || !sameNodes(r.desc, right) {
			return stale("right range not frozen for this merge or not co-located"), 0, true, nil
		}
		if merged.RangeId != r.rangeID || !bytes.Equal(merged.StartKey, r.desc.StartKey) || !bytes.Equal(merged.EndKey, right.EndKey) ||
			merged.Generation <= max(r.desc.Generation, right.Generation) || !sameNodes(merged, r.desc) || merged.MergingInto != 0 {
			return stale("malformed merged descriptor"), 0, true, nil
		}
		if local := r.store.Replica(right.RangeId); local != nil && local != r {
			if applied := local.Applied(); applied < right.FreezeIndex {
				// The coordinator checked every right replica before proposing; this means a bug or a
				// replaced disk, and the widened span may miss the right range's last writes here.
				r.store.cfg.Logger.Error("merge: local right replica behind its freeze", "left", r.rangeID, "right", right.RangeId,
					"applied", applied, "freeze_index", right.FreezeIndex)
			}
		}
		r.desc = proto.Clone(merged).(*pb.RangeDescriptor)
		if err := r.writeDescLocked(b); err != nil {
			return Result{}, 0, true, err
		}
		// Retire the right range's raft state on this node; its data is now the left range's. The
		// tombstone at the largest replica id drops every later message for the right range. The
		// right range's appends still in the log pipeline land first.
		if !r.store.flushLog() {
			return Result{}, 0, true, errStopped
		}
		lo, hi := storage.RaftStateSpan(right.RangeId)
		if err := b.DeleteRange(lo, hi); err != nil {
			return Result{}, 0, true, err
		}
		if err := b.Set(storage.ReplicaTombstoneKey(right.RangeId), u64(math.MaxUint64)); err != nil {
			return Result{}, 0, true, err
		}
		r.recordSpan(pb.RangeFeedEvent_MERGE, r.desc, right)
		return Result{}, right.RangeId, true, nil

	case cmd.MergeAbort != nil:
		ma := cmd.MergeAbort
		if len(ma.RightStartKey) > 0 && containsKey(r.desc, ma.RightStartKey) && !bytes.Equal(ma.RightStartKey, r.desc.StartKey) {
			// The left range already absorbed the right one: the merge happened, nothing to abort.
			return Result{Merged: true}, 0, true, nil
		}
		// Any trigger planned on the current generation can no longer apply.
		d := proto.Clone(r.desc).(*pb.RangeDescriptor)
		d.Generation++
		r.desc = d
		if err := r.writeDescLocked(b); err != nil {
			return Result{}, 0, true, err
		}
		return Result{}, 0, true, nil
	}
	return Result{}, 0, false, nil
}

// MergedAway reports whether this node retired its replica of rangeID in a merge (its tombstone is
// at the largest replica id).
func (s *Store) MergedAway(rangeID uint64) bool {
	return s.tombstoneReplicaID(rangeID) == math.MaxUint64
}

// retireMerged removes the in-memory replica of a range that a merge just absorbed on this node. Its
// raft state was deleted (and its tombstone written) in the merge's own batch; its data stays, now
// owned by the left range.
func (s *Store) retireMerged(rangeID uint64) {
	r := s.Replica(rangeID)
	if r == nil {
		return
	}
	r.mu.Lock()
	r.destroyed = true
	r.failPendingLocked(pb.ErrorCode_RANGE_MOVED, "range merged into its left neighbour")
	desc := r.desc
	r.mu.Unlock()
	s.forget(r)
	s.removedChanges(r, desc)
	s.cfg.Logger.Info("replica merged away", "range", rangeID, "node", s.cfg.NodeID)
	if s.cfg.OnReplicaRemoved != nil {
		s.cfg.OnReplicaRemoved(rangeID)
	}
}

// forget drops r from the store's maps.
func (s *Store) forget(r *Replica) {
	s.activeMu.Lock()
	if s.active[r.rangeID] == r {
		delete(s.active, r.rangeID)
	}
	s.activeMu.Unlock()
	s.mu.Lock()
	if s.replicas[r.rangeID] == r {
		delete(s.replicas, r.rangeID)
	}
	s.mu.Unlock()
}
