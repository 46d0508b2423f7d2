package replica

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/logpipe"
)

// The node's raft log pipeline. Every replica's RawNode runs with etcd raft's AsyncStorageWrites:
// a Ready hands log appends (entries, hard state, snapshot) and committed entries to apply as local
// messages (MsgStorageAppend, MsgStorageApply), each carrying the responses to deliver once its
// write is done. The node keeps one append "thread" for all its ranges, split in two:
//
//   - the raft loop (processReady) writes every range's appends of a cycle into the open log batch,
//     sends the messages that need no durability at once (a leader's appends leave before its own
//     fsync), and applies the committed entries it was handed, which are already durable here and on
//     a quorum: an apply never waits for an fsync of entries it does not apply;
//   - the log writer (package logpipe) commits the open batch with one fsync for all ranges (group
//     commit) and then delivers its responses (deliverLog): to other nodes through the transport
//     (MsgAppResp, votes), to this node's replicas by handing them back to the loop, which steps them
//     at the start of its next cycle (the leader's own MsgAppResp, MsgStorageAppendResp).
//
// While the writer syncs one batch the loop keeps filling the next: proposals that arrive during an
// fsync join the next batch, and the leader's own append is on a write's critical path once, in
// parallel with its followers' appends.
//
// Invariants (logpipe's, plus):
//   - A response leaves (or is stepped) only after the batch holding its write is committed, and
//     synced when it carries responses: acknowledged means durable on a quorum, as raft's
//     MsgAppResp and MsgVoteResp promise.
//   - What changes the engine outside the log (a split's new raft state, a merge retiring its right
//     range, a replica's destruction) first flushes the pipeline (flushLog), so no pending append of
//     the ranges it touches lands after it.

// errStopped fails an apply that had to wait for the log pipeline while the node stopped.
var errStopped = errors.New("node stopping")

// logWaiters is what waits for one batch of the log pipeline.
type logWaiters struct {
	sends []durableSend // to other nodes once committed
	steps []localStep   // back into this node's replicas once committed
}

// durableSend is a response to another node that must not leave before its write is durable.
type durableSend struct {
	r      *Replica
	toNode uint64
	m      *raftpb.Message
}

// localStep is a message for one of this node's replicas, stepped by the raft loop; with m nil it
// reports replica unreachable (a send to it failed).
type localStep struct {
	r           *Replica
	m           *raftpb.Message
	unreachable uint64
}

func (s *Store) newLogPipe() *logpipe.Pipe[logWaiters] {
	return logpipe.New(logpipe.Config[logWaiters]{
		NewBatch:    s.eng.NewIndexedBatch,
		Deliver:     s.deliverLog,
		Fatal:       func(err error) { s.fatal(fmt.Errorf("node %d: %w", s.cfg.NodeID, err)) },
		Stopped:     s.stopper,
		CommitSince: &s.commitSince,
	})
}

// flushLog waits until everything the loop has written to the log so far is committed. It may be
// called with replica locks held; it returns false if the node stopped.
func (s *Store) flushLog() bool { return s.log.Flush() }

// deliverLog sends and hands back a committed batch's responses. It takes no replica lock.
func (s *Store) deliverLog(w *logpipe.Write[logWaiters]) {
	steps := w.Waiters.steps
	for _, d := range w.Waiters.sends {
		data, err := proto.Marshal(d.m)
		if err != nil {
			continue
		}
		if !s.cfg.Transport.Send(&pb.RaftMessage{RangeId: d.r.rangeID, FromNode: s.cfg.NodeID, ToNode: d.toNode, Message: data}) {
			steps = append(steps, localStep{r: d.r, unreachable: d.m.GetTo()})
		}
	}
	if len(steps) == 0 {
		return
	}
	s.stepsMu.Lock()
	s.steps = append(s.steps, steps...)
	s.stepsMu.Unlock()
	var last *Replica
	for _, st := range steps {
		if st.r != last {
			s.markReady(st.r)
			last = st.r
		}
	}
}

// stepLocal steps the messages handed back to the loop since its last cycle.
func (s *Store) stepLocal() {
	s.stepsMu.Lock()
	steps := s.steps
	s.steps = s.spareSteps[:0]
	s.stepsMu.Unlock()
	for i, st := range steps {
		r := st.r
		r.mu.Lock()
		if !r.destroyed {
			if st.m != nil {
				_ = r.rn.Step(st.m)
			} else {
				r.rn.ReportUnreachable(st.unreachable)
			}
		}
		r.mu.Unlock()
		steps[i] = localStep{}
	}
	s.spareSteps = steps[:0]
}

// persistAppendLocked adds one MsgStorageAppend of r to the open batch: its snapshot, entries and
// hard state, and the responses that wait for them.
func (s *Store) persistAppendLocked(r *Replica, m *raftpb.Message) (snapshot bool, err error) {
	w := s.log.Open()
	prevHS := r.log.HardState()
	if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
		if err := r.installSnapshotLocked(w.Batch, snap); err != nil {
			return false, err
		}
		snapshot = true
	}
	if err := r.log.Append(w.Batch, m.GetEntries()); err != nil {
		return false, err
	}
	var hs *raftpb.HardState
	if m.Term != nil || m.Vote != nil || m.Commit != nil {
		// raft set the three fields together and hands the message over: nothing changes them.
		hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		if err := r.log.SetHardState(w.Batch, hs); err != nil {
			return false, err
		}
	}
	// Responses wait for this write and every earlier one. The earlier ones are committed by the time
	// this batch is (one writer, in order), synced when they needed it; this one needs its own sync
	// only for what it adds that must survive a crash (raft.MustSync: entries, term, vote).
	if snapshot || len(m.GetEntries()) > 0 || (hs != nil && raft.MustSync(hs, prevHS, 0)) {
		w.Sync = true
	}
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.replicaID {
			w.Waiters.steps = append(w.Waiters.steps, localStep{r: r, m: resp})
			continue
		}
		if to := r.nodeOfLocked(resp.GetTo()); to != 0 {
			w.Waiters.sends = append(w.Waiters.sends, durableSend{r: r, toNode: to, m: resp})
		}
	}
	s.entriesWritten.Add(uint64(len(m.GetEntries())))
	return snapshot, nil
}
