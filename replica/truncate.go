package replica

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// maxLogKeptFactor bounds how far behind a lagging follower may hold back the leader's log
// truncation, in multiples of LogTruncateThreshold; a follower further behind gets a snapshot.
const maxLogKeptFactor = 64

// truncationPointLocked is the index up to which the log may be truncated: half the threshold
// behind the applied index, but on a leader never past what a live follower still needs — the index
// of a snapshot in flight to it (it continues from there) or its last matched entry — unless that
// follower is more than maxLogKeptFactor thresholds behind. A follower silent for an election
// timeout (raft's RecentActive, kept by CheckQuorum) holds nothing back. Truncating past a follower that is
// receiving a snapshot makes the snapshot useless on arrival: it would be sent again, forever,
// for a large range under writes.
func (r *Replica) truncationPointLocked() uint64 {
	threshold := r.store.cfg.LogTruncateThreshold
	to := r.applied - threshold/2
	if r.state != raft.StateLeader {
		return to
	}
	var floor uint64
	if r.applied > threshold*maxLogKeptFactor {
		floor = r.applied - threshold*maxLogKeptFactor
	}
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == r.replicaID {
			return
		}
		if !pr.RecentActive && pr.State != tracker.StateSnapshot {
			return // silent for an election timeout: it will need a snapshot anyway
		}
		need := pr.Match
		if pr.State == tracker.StateSnapshot && pr.PendingSnapshot > need {
			need = pr.PendingSnapshot
		}
		if need >= floor && need < to {
			to = need
		}
	})
	return to
}
