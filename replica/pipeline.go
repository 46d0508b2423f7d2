package replica

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
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
//   - the log writer (a goroutine of its own) commits the open batch with one fsync for all ranges
//     (group commit) and then delivers its responses: to other nodes through the transport
//     (MsgAppResp, votes), to this node's replicas by handing them back to the loop, which steps them
//     at the start of its next cycle (the leader's own MsgAppResp, MsgStorageAppendResp).
//
// While the writer syncs one batch the loop keeps filling the next: proposals that arrive during an
// fsync join the next batch, and the leader's own append is on a write's critical path once, in
// parallel with its followers' appends.
//
// Invariants:
//   - Batches are committed in the order the loop filled them (one writer), so a range's appends
//     reach the engine in raft's order, and a synced batch makes every earlier one durable too.
//   - A response leaves (or is stepped) only after the batch holding its write is committed, and
//     synced when it carries responses: acknowledged means durable on a quorum, as raft's
//     MsgAppResp and MsgVoteResp promise.
//   - The writer takes no replica lock, so the loop may wait for it (flushLog) while holding one.
//   - The writer takes the open batch only between the loop's collect phases: one cycle's appends
//     are never split across two fsyncs.
//   - What changes the engine outside the log (a split's new raft state, a merge retiring its right
//     range, a replica's destruction) first flushes the pipeline, so no pending append of the ranges
//     it touches lands after it.
//
// Without Start (tests, fuzzing), processReady commits the open batch itself at the end of its
// collect phase: each call is one deterministic step.

// errStopped fails an apply that had to wait for the log pipeline while the node stopped.
var errStopped = errors.New("node stopping")

// logWrite is one batch of the raft log pipeline and what waits for it.
type logWrite struct {
	batch *storage.Batch
	// sync: some append in the batch writes entries, a term or a vote, or a snapshot. A batch of
	// commit indexes alone may be lost in a crash and relearned.
	sync  bool
	sends []durableSend // to other nodes once committed
	steps []localStep   // back into this node's replicas once committed
	done  chan struct{} // closed once committed (never, if the commit fails: the node stops)
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

// openLog returns the batch the loop is filling, starting one if needed. Only the loop calls
// it, during its collect phase (the writer does not take the open batch then).
func (s *Store) openLog() *logWrite {
	if s.open == nil {
		w := &logWrite{batch: s.eng.NewIndexedBatch(), done: make(chan struct{})}
		s.logMu.Lock()
		s.open = w
		s.logMu.Unlock()
	}
	return s.open
}

// beginCollect and endCollect bracket the loop's collect phase. endCollect hands the open batch on:
// to the writer goroutine, or, without one, commits it at once.
func (s *Store) beginCollect() {
	s.logMu.Lock()
	s.collecting = true
	s.logMu.Unlock()
}

func (s *Store) endCollect() bool {
	s.logMu.Lock()
	s.collecting = false
	w := s.open
	if w != nil && !s.pipelined {
		s.open = nil
	}
	s.logMu.Unlock()
	if w == nil {
		return true
	}
	if !s.pipelined {
		return s.writeLog(w)
	}
	select {
	case s.logKick <- struct{}{}:
	default:
	}
	return true
}

// abortCollect ends a collect phase that failed (the node is stopping): the open batch is dropped
// uncommitted, and nothing waiting for it will see it done.
func (s *Store) abortCollect() {
	s.logMu.Lock()
	s.collecting = false
	w := s.open
	s.open = nil
	s.logMu.Unlock()
	if w != nil {
		w.batch.Close()
	}
}

// flushLog waits until everything the loop has written to the log so far is committed. It may be
// called with replica locks held (the writer takes none); it returns false if the node stopped.
func (s *Store) flushLog() bool {
	s.logMu.Lock()
	w := s.open
	if !s.pipelined {
		// No writer goroutine: the caller is the loop's own, which commits its batch itself.
		s.open = nil
		s.logMu.Unlock()
		return w == nil || s.writeLog(w)
	}
	if w == nil {
		w = s.inflight
	}
	s.logMu.Unlock()
	if w == nil {
		return true
	}
	select {
	case s.logKick <- struct{}{}:
	default:
	}
	select {
	case <-w.done:
		return true
	case <-s.stopper:
		return false
	}
}

// logWriter is the writer goroutine: it commits each batch the loop hands on, in order.
func (s *Store) logWriter() {
	for {
		select {
		case <-s.stopper:
			return
		case <-s.logKick:
		}
		for {
			select {
			case <-s.stopper:
				return
			default:
			}
			s.logMu.Lock()
			w := s.open
			if w == nil || s.collecting {
				s.logMu.Unlock()
				break
			}
			s.open, s.inflight = nil, w
			s.logMu.Unlock()
			ok := s.writeLog(w)
			s.logMu.Lock()
			s.inflight = nil
			s.logMu.Unlock()
			if !ok {
				return
			}
		}
	}
}

// writeLog commits w and delivers its responses. It takes no replica lock. False: the commit failed
// and the node stops (see fatal).
func (s *Store) writeLog(w *logWrite) bool {
	if !w.batch.Empty() {
		s.commitSince.Store(time.Now().UnixNano())
		err := w.batch.Commit(w.sync)
		s.commitSince.Store(0)
		if err != nil {
			w.batch.Close()
			s.fatal(fmt.Errorf("node %d: commit raft batch: %w", s.cfg.NodeID, err))
			return false
		}
		if w.sync {
			s.syncs.Add(1)
		}
	}
	w.batch.Close()
	for _, d := range w.sends {
		data, err := proto.Marshal(d.m)
		if err != nil {
			continue
		}
		if !s.cfg.Transport.Send(&pb.RaftMessage{RangeId: d.r.rangeID, FromNode: s.cfg.NodeID, ToNode: d.toNode, Message: data}) {
			w.steps = append(w.steps, localStep{r: d.r, unreachable: d.m.GetTo()})
		}
	}
	if len(w.steps) > 0 {
		s.stepsMu.Lock()
		s.steps = append(s.steps, w.steps...)
		s.stepsMu.Unlock()
		var last *Replica
		for _, st := range w.steps {
			if st.r != last {
				s.markReady(st.r)
				last = st.r
			}
		}
	}
	close(w.done)
	return true
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
	w := s.openLog()
	prevHS := r.log.HardState()
	if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
		if err := r.installSnapshotLocked(w.batch, snap); err != nil {
			return false, err
		}
		snapshot = true
	}
	if err := r.log.Append(w.batch, m.GetEntries()); err != nil {
		return false, err
	}
	var hs *raftpb.HardState
	if m.Term != nil || m.Vote != nil || m.Commit != nil {
		// raft set the three fields together and hands the message over: nothing changes them.
		hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		if err := r.log.SetHardState(w.batch, hs); err != nil {
			return false, err
		}
	}
	// Responses wait for this write and every earlier one. The earlier ones are committed by the time
	// this batch is (one writer, in order), synced when they needed it; this one needs its own sync
	// only for what it adds that must survive a crash (raft.MustSync: entries, term, vote).
	if snapshot || len(m.GetEntries()) > 0 || (hs != nil && raft.MustSync(hs, prevHS, 0)) {
		w.sync = true
	}
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.replicaID {
			w.steps = append(w.steps, localStep{r: r, m: resp})
			continue
		}
		if to := r.nodeOfLocked(resp.GetTo()); to != 0 {
			w.sends = append(w.sends, durableSend{r: r, toNode: to, m: resp})
		}
	}
	s.entriesWritten.Add(uint64(len(m.GetEntries())))
	return snapshot, nil
}
