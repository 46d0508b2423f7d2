package replica

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Leader leases (raft thesis §6.4.1): a read needs proof that no other leader can have committed a
// write since this one last heard from a quorum. A ReadIndex round gives that proof at the moment it
// was sent: every follower that acknowledged it reset its election timer on receipt, and with
// CheckQuorum a follower refuses to vote while it heard from a leader within ElectionTicks. So no
// other leader can be elected (by a normal election) before sent + (ElectionTicks-1) ticks of the
// followers' clocks. Until sent + leaseFraction of that, reads on the leader are served from its
// applied state with no round trip.
//
// A follower that acknowledged a lease round and then restarts has forgotten its leader, and etcd
// raft would let it vote at once; so a replica loaded at start neither grants votes (other than for
// a leadership transfer) nor campaigns until one election timeout has passed (voteBlackoutLocked).
//
// The exceptions are handled here: a leadership transfer forces an election that ignores follower
// leases, so starting one drops the lease and no new lease is taken for two election timeouts; a
// change of state or term drops it; the lease is measured on the monotonic clock, so a paused
// process (SIGSTOP) finds it expired when it resumes. Clock rates are assumed to differ by less
// than 1-leaseFraction.

const leaseFraction = 0.8

// leaseDuration is how long after a ReadIndex round was sent its lease is valid.
func (s *Store) leaseDuration() time.Duration {
	if s.cfg.DisableLeaseReads {
		return 0
	}
	return time.Duration(float64(time.Duration(s.cfg.ElectionTicks-1)*s.cfg.TickInterval) * leaseFraction)
}

// extendLeaseLocked records the lease proven by a completed ReadIndex round sent at sent, whose read
// index is index.
func (r *Replica) extendLeaseLocked(sent time.Time, index uint64) {
	d := r.store.leaseDuration()
	if d <= 0 || sent.IsZero() || r.state != raft.StateLeader || sent.Before(r.noLeaseUntil) {
		return
	}
	if until := sent.Add(d); until.After(r.leaseUntil) {
		r.leaseUntil = until
		if index > r.leaseIndex {
			r.leaseIndex = index
		}
	}
}

// leaseReadLocked reports whether a read may be served now from the applied state under the lease.
func (r *Replica) leaseReadLocked(now time.Time) bool {
	if r.leaseUntil.IsZero() || !now.Before(r.leaseUntil) || r.applied < r.leaseIndex || r.state != raft.StateLeader {
		return false
	}
	if r.rn.BasicStatus().LeadTransferee != 0 {
		r.dropLeaseLocked(now)
		return false
	}
	return true
}

// dropLeaseLocked ends the lease; with a transfer under way, none is taken for two election timeouts.
func (r *Replica) dropLeaseLocked(now time.Time) {
	r.leaseUntil = time.Time{}
	if now.IsZero() {
		return
	}
	r.noLeaseUntil = now.Add(2 * time.Duration(r.store.cfg.ElectionTicks) * r.store.cfg.TickInterval)
}

// campaignTransfer is the context etcd raft puts on the votes of a leadership transfer, which the
// old leader started itself (and so dropped its lease for).
const campaignTransfer = "CampaignTransfer"

// voteBlackoutLocked reports whether msg is a vote request this replica must not answer yet: it was
// loaded at start less than an election timeout ago, so it may have acknowledged a lease it forgot.
func (r *Replica) voteBlackoutLocked(msg *raftpb.Message) bool {
	if r.noVotesUntil.IsZero() {
		return false
	}
	if !time.Now().Before(r.noVotesUntil) {
		r.noVotesUntil = time.Time{}
		return false
	}
	t := msg.GetType()
	return (t == raftpb.MsgVote || t == raftpb.MsgPreVote) && string(msg.GetContext()) != campaignTransfer
}

// votersLocked counts the voters of the current configuration (a lone voter has no lease to fear).
func (r *Replica) votersLocked() int {
	if r.log == nil || r.log.ConfState() == nil {
		return 0
	}
	return len(r.log.ConfState().GetVoters()) + len(r.log.ConfState().GetVotersOutgoing())
}
