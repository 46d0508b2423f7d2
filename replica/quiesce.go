package replica

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// Quiescence (as in CockroachDB): a leader whose followers all hold its whole log, with nothing in
// flight, sends each follower one last heartbeat marked quiesce and stops ticking; a follower that
// receives it and has the leader's last entry stops ticking too. An idle range then costs no CPU and
// no messages. Anything that needs the group — a proposal, a read, a transfer, a vote, any
// non-heartbeat message — wakes the replica, and kv wakes replicas whose leader's node stops
// heartbeating so the group can elect a new leader.

// unquiesceLocked makes the replica tick again.
func (r *Replica) unquiesceLocked() {
	if !r.quiesced {
		return
	}
	r.quiesced = false
	r.store.activeMu.Lock()
	r.store.active[r.rangeID] = r
	r.store.activeMu.Unlock()
}

func (r *Replica) quiesceLocked() {
	if r.quiesced {
		return
	}
	r.quiesced = true
	r.store.activeMu.Lock()
	delete(r.store.active, r.rangeID)
	r.store.activeMu.Unlock()
}

// afterStepLocked updates quiescence after stepping an incoming message.
func (r *Replica) afterStepLocked(msg *raftpb.Message, quiesce bool) {
	switch {
	case quiesce && msg.GetType() == raftpb.MsgHeartbeat:
		if r.state == raft.StateFollower && r.leader == msg.GetFrom() && r.log.Last() == msg.GetCommit() && len(r.proposals) == 0 {
			r.quiesceLocked()
		} else {
			r.unquiesceLocked()
		}
	case msg.GetType() == raftpb.MsgHeartbeatResp, msg.GetType() == raftpb.MsgHeartbeat:
		// Heartbeats alone neither wake nor put to sleep.
	default:
		r.unquiesceLocked()
	}
}

// maybeQuiesceLocked puts an idle leader (and, by its heartbeat, its followers) to sleep.
func (r *Replica) maybeQuiesceLocked() {
	if r.quiesced || r.state != raft.StateLeader || r.desc == nil || r.destroyed {
		return
	}
	if len(r.proposals) > 0 || r.readQueue != nil || len(r.readsSent) > 0 || len(r.readsWait) > 0 || r.rn.HasReady() {
		return
	}
	st := r.rn.Status()
	last := r.log.Last()
	if st.GetCommit() != last || r.applied != last || st.LeadTransferee != 0 || len(r.log.ConfState().VotersOutgoing) > 0 {
		return
	}
	caughtUp := true
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match != last {
			caughtUp = false
		}
	})
	if !caughtUp {
		return
	}
	for _, rd := range r.desc.Replicas {
		if rd.ReplicaId == r.replicaID {
			continue
		}
		hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(rd.ReplicaId), From: proto.Uint64(r.replicaID),
			Term: proto.Uint64(st.GetTerm()), Commit: proto.Uint64(last)}
		data, err := proto.Marshal(hb)
		if err != nil {
			return
		}
		r.store.cfg.Transport.Send(&pb.RaftMessage{RangeId: r.rangeID, FromNode: r.store.cfg.NodeID, ToNode: rd.NodeId, Message: data, Quiesce: true})
	}
	r.quiesceLocked()
}

// tickActive ticks every awake replica and lets idle leaders quiesce.
func (s *Store) tickActive() {
	s.activeMu.Lock()
	reps := make([]*Replica, 0, len(s.active))
	for _, r := range s.active {
		reps = append(reps, r)
	}
	s.activeMu.Unlock()
	for _, r := range reps {
		r.mu.Lock()
		if !r.destroyed && !r.quiesced {
			// Check before ticking: a leader's tick queues heartbeats, which would always look like work.
			r.maybeQuiesceLocked()
			if !r.quiesced {
				r.rn.Tick()
			}
		}
		r.mu.Unlock()
		s.markReady(r)
	}
}

// WakeReplicasLedBy wakes every quiesced replica whose leader is on node (called when that node
// has fallen silent), so the group notices and elects another leader.
//
// A sleeping replica's election clock stood still; a woken one first catches up on the ticks it
// missed since a raft message from node last arrived, an election timeout at most, as if it had
// ticked all along. Without that it would campaign only a whole election timeout after the wake-up,
// and a peer woken a little later would still refuse its votes as within its leader's lease: the
// range stayed leaderless for the node's silence plus one to two election timeouts more (4-5 s
// with 1-s heartbeats). The leader's lease stays sound: the ticks counted start at the last
// message from the leader's node, so they never exceed what a ticking follower's clock would show.
func (s *Store) WakeReplicasLedBy(node uint64) {
	missed := s.missedTicks(node)
	for _, r := range s.Replicas() {
		r.mu.Lock()
		woken := false
		if r.quiesced && !r.destroyed && r.nodeOfLocked(r.leader) == node {
			r.unquiesceLocked()
			for range missed {
				r.rn.Tick()
			}
			woken = true
		}
		r.mu.Unlock()
		if woken {
			s.markReady(r)
		}
	}
}

// missedTicks is how many ticks have passed since a raft message from node last arrived, an
// election timeout at most (none when none arrived since the store started: a replica loaded at
// start waits out its own vote blackout).
func (s *Store) missedTicks(node uint64) int {
	s.heardMu.Lock()
	at, ok := s.heard[node]
	s.heardMu.Unlock()
	if !ok || s.cfg.TickInterval <= 0 {
		return 0
	}
	return min(int(time.Since(at)/s.cfg.TickInterval), s.cfg.ElectionTicks)
}

// heardFrom records the arrival of msgs from their nodes.
func (s *Store) heardFrom(msgs []*pb.RaftMessage) {
	if len(msgs) == 0 {
		return
	}
	now := time.Now()
	s.heardMu.Lock()
	last := uint64(0)
	for _, m := range msgs {
		if m.FromNode != last {
			s.heard[m.FromNode], last = now, m.FromNode
		}
	}
	s.heardMu.Unlock()
}

// ActiveReplicas counts replicas that are ticking (not quiesced).
func (s *Store) ActiveReplicas() int {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	return len(s.active)
}

// Quiesced reports whether the replica sleeps (is not ticked).
func (r *Replica) Quiesced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.quiesced
}
