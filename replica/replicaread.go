package replica

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/shoaldb/shoal/pb"
)

// Reads at a replica that does not lead (a follower or a learner). Raft's ReadIndex, asked of the
// leader, gives the leader's commit index as of the moment the request left: every write
// acknowledged before then is at or below it, so once this replica has applied that far its state
// is linearizable for a read that started before the request. The time the request left is also
// how current the state is: a bounded-staleness read within the bound of it needs no new round.

// ReplicaReadBarrier waits until a read here is linearizable, leader or not: a leader does what
// ReadBarrier does; another replica asks the leader for its commit index and waits to apply it.
func (r *Replica) ReplicaReadBarrier(ctx context.Context) error {
	r.mu.Lock()
	if r.state == raft.StateLeader {
		r.mu.Unlock()
		return r.ReadBarrier(ctx)
	}
	if e := r.checkUsableLocked(); e != nil {
		r.mu.Unlock()
		return e
	}
	if r.leader == 0 {
		r.mu.Unlock()
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: no leader known to replica on node %d", r.rangeID, r.store.cfg.NodeID)}
	}
	r.store.replicaReads.Add(1)
	b := r.queueReadLocked()
	r.mu.Unlock()
	r.store.markReady(r)
	// The leader drops a ReadIndex it cannot answer (it lost the leadership on the way): give up
	// after an election timeout so that the client tries elsewhere.
	wait := time.NewTimer(time.Duration(r.store.cfg.ElectionTicks) * r.store.cfg.TickInterval)
	defer wait.Stop()
	select {
	case <-b.done:
		if b.err != nil {
			return b.err
		}
		r.mu.Lock()
		if b.sent.After(r.currentAt) {
			r.currentAt = b.sent
		}
		r.mu.Unlock()
		return nil
	case <-wait.C:
		e := &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: no answer from the leader to a read index in %s", r.rangeID, r.store.cfg.TickInterval*time.Duration(r.store.cfg.ElectionTicks))}
		// The request is lost: forget it (its other readers get the same answer), or it would keep
		// the range from quiescing until the next change of leader.
		r.mu.Lock()
		if r.readsSent[string(b.ctx)] == b {
			delete(r.readsSent, string(b.ctx))
			b.err = e
			close(b.done)
		}
		r.mu.Unlock()
		return e
	case <-ctx.Done():
		return &Error{Code: pb.ErrorCode_TIMEOUT, Msg: fmt.Sprintf("range %d: replica read barrier: %v", r.rangeID, ctx.Err())}
	case <-r.store.stopper:
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: "node stopping"}
	}
}

// BoundedReadBarrier waits until this replica's state reflects every write acknowledged more than
// maxStaleness ago: at once if a read index confirmed it within the bound (or it is the leader
// holding its lease), else after a new round (ReplicaReadBarrier).
func (r *Replica) BoundedReadBarrier(ctx context.Context, maxStaleness time.Duration) error {
	r.mu.Lock()
	now := time.Now()
	fresh := r.state == raft.StateLeader && r.leaseReadLocked(now) ||
		!r.currentAt.IsZero() && now.Sub(r.currentAt) <= maxStaleness
	if fresh {
		e := r.checkUsableLocked()
		r.mu.Unlock()
		if e != nil {
			return e
		}
		r.store.boundedLocalReads.Add(1)
		return nil
	}
	r.mu.Unlock()
	return r.ReplicaReadBarrier(ctx)
}
