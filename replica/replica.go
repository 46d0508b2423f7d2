// Package replica owns one Raft group per range (multi-raft): the raft log and hard state on the
// node's engine, the state machine that applies committed commands to range data, snapshots streamed
// as key-value chunks, configuration changes (learner, promotion, removal with joint consensus),
// leadership transfer and linearizable reads.
//
// A node has one Store and one loop that drives every replica's RawNode with etcd raft's
// asynchronous storage writes (doc.go): each cycle writes all ranges' new entries and hard states
// into one engine batch, which a log writer commits with one fsync (group commit) while the loop
// goes on with the next cycle; responses that promise durability leave after that fsync, and
// committed entries are applied as soon as they are durable here and on a quorum (pipeline.go).
//
// Reads are linearizable through raft's ReadIndex (ReadOnlySafe): a read waits for a heartbeat round
// that confirms leadership and for the local applied index to reach the commit index. It makes no
// assumption about clocks, so a paused or partitioned former leader can never serve a stale read.
// Follower reads skip that check and may be stale.
//
// Two parts live in internal packages of their own: the raft log on the engine (raftlog, etcd raft's
// Storage) and the checks of messages from the network (validate).
//
// It must never route between ranges or nodes (package kv does), and never talks to the network
// except through the Transport it is given.
package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/eval"
	"github.com/shoaldb/shoal/replica/internal/raftlog"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
)

// Error is a typed replica-level error; kv turns it into a pb.Error for clients.
type Error struct {
	Code       pb.ErrorCode
	Msg        string
	LeaderNode uint64
	Desc       *pb.RangeDescriptor
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Msg) }

// Result is the outcome of applying one command.
type Result struct {
	Swapped bool
	Found   bool
	Current []byte
	Counter uint64
	Err     *Error
	// Index is the log index the command applied at (set for merge-protocol commands).
	Index uint64
	// Merged answers a MergeAbort: the left range had already absorbed the right one.
	Merged bool
	// Txn is a transaction's outcome.
	Txn *pb.TxnResponse
}

type proposal struct {
	done   chan struct{}
	result Result
	err    *Error
	// term is the leader's term the entry was proposed in: its entry, if it commits, has this term.
	term uint64
	// orphan: this replica lost the leadership while the proposal waited. It stays until the entry
	// applies here (success) or an entry of a later term applies first (then it never will: terms
	// do not decrease along the log), so a planned leadership transfer, whose target has every
	// entry the old leader accepted, answers its writes instead of calling them ambiguous.
	orphan bool
	// gated is the size this proposal holds in the store's proposal gate (0: not gated); given back
	// once, under r.mu, when the proposal leaves r.proposals.
	gated int64
}

// userWrite reports whether cmd is a client's write, the only kind the proposal gate may refuse:
// splits, merges, meta updates and counters are the cluster's own work.
func userWrite(cmd *pb.Command) bool {
	return (len(cmd.Mutations) > 0 || cmd.Txn != nil) && cmd.Split == nil && cmd.MetaUpdate == nil && len(cmd.IncrementKey) == 0 &&
		cmd.Freeze == nil && cmd.Unfreeze == nil && cmd.Merge == nil && cmd.MergeAbort == nil
}

// release gives the proposal's share of the proposal gate back.
func (p *proposal) release(s *Store) {
	if p.gated > 0 {
		s.proposalGate.Release(p.gated)
		p.gated = 0
	}
}

type readBatch struct {
	sent time.Time // when its ReadIndex was issued (the lease it proves starts then)
	// leaderTerm: the term it was sent in as leader (0: sent as a follower or learner). Only a
	// leader's own round in its current term proves a lease.
	leaderTerm uint64
	ctx        []byte
	index      uint64
	done       chan struct{}
	err        *Error
}

type incomingSnapshot struct {
	index uint64
	desc  *pb.RangeDescriptor
	kvs   []*pb.KeyValue
}

// Replica is this node's member of one range's raft group.
type Replica struct {
	store     *Store
	rangeID   uint64
	replicaID uint64

	mu        sync.Mutex
	rn        *raft.RawNode
	log       *raftlog.Log
	desc      *pb.RangeDescriptor // nil while uninitialized (created by a message, waiting for a snapshot)
	applied   uint64
	leader    uint64 // raft replica id of the leader, 0 if unknown
	state     raft.StateType
	destroyed bool
	peerNodes map[uint64]uint64 // replica id → node id, learned from messages (for uninitialized replicas)

	// nextProposalID starts at a random value (newProposalIDs): a replica resolves whatever pending
	// proposal an applied entry's id names, and entries proposed by another replica, or by this one
	// before a restart, must not name one of its own.
	nextProposalID uint64
	proposals      map[uint64]*proposal
	// confProposal is the id of the last configuration change proposed here; while it is in
	// proposals raft holds it pending and would turn another conf change into an empty entry.
	confProposal uint64
	// appliedTerm is the term of the last entry applied (0 after a restart): a higher one resolves
	// the orphaned proposals of the terms before it.
	appliedTerm uint64
	// changes collects the change-stream events of the batch being applied (ChangeSink), each at
	// applyingIndex, the index of the entry being applied.
	changes       []*pb.RangeFeedEvent
	applyingIndex uint64
	record        func(pb.RangeFeedEvent_Kind, []byte, stored.Value)

	readQueue *readBatch            // reads waiting for the next ReadIndex
	readsSent map[string]*readBatch // ReadIndex requests in flight
	readsWait []*readBatch          // read index known, waiting for apply
	// readCounter numbers this replica's ReadIndex requests from a random start: answers are
	// matched by context, and a late answer to an earlier incarnation's request (before a restart,
	// or a replica removed and re-created here) must never release a new read at its older index.
	readCounter uint64

	pendingSnap *incomingSnapshot

	// quiesced replicas are not ticked: an idle range costs no CPU and sends no heartbeats. Any
	// request or non-heartbeat message wakes it (see quiesce.go).
	quiesced bool

	// Leader lease (lease.go).
	leaseUntil, noLeaseUntil time.Time
	// currentAt: this replica's state holds every write acknowledged before it (the sending time of
	// the last read index it applied; replicaread.go).
	currentAt    time.Time
	leaseIndex   uint64
	noVotesUntil time.Time // set at load: no votes or campaigns before (lease.go)

	// Load counters (read by the kv layer for stats; atomics so reads need no lock). Scans are
	// also counted in Reads: the share of scans among the reads classifies a range (node profiles).
	Reads, Writes, Scans atomic.Uint64

	// clockFloor is the latest leader clock (Unix ms) stamped on a command this replica applied:
	// expiry is never judged at an earlier time here (clock.go).
	clockFloor atomic.Int64
}

// RangeID is the replica's range.
func (r *Replica) RangeID() uint64 { return r.rangeID }

// Desc returns a copy of the range descriptor, or nil if the replica is not initialized yet.
func (r *Replica) Desc() *pb.RangeDescriptor {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.desc == nil {
		return nil
	}
	return proto.Clone(r.desc).(*pb.RangeDescriptor)
}

// IsMeta reports whether this is the meta range.
func (r *Replica) IsMeta() bool { return r.rangeID == MetaRangeID }

// Status is a snapshot of a replica's raft view.
type Status struct {
	Desc         *pb.RangeDescriptor
	LeaderNode   uint64
	IsLeader     bool
	Applied      uint64
	Term         uint64
	LastIndex    uint64
	ReplicaID    uint64
	LaggingPeers map[uint64]uint64 // replica id → entries behind the leader's last index (leader only)
}

// Status reports the replica's raft state.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{Applied: r.applied, ReplicaID: r.replicaID, LastIndex: r.log.Last()}
	if r.desc != nil {
		st.Desc = proto.Clone(r.desc).(*pb.RangeDescriptor)
	}
	st.LeaderNode = r.nodeOfLocked(r.leader)
	st.IsLeader = r.state == raft.StateLeader
	bs := r.rn.BasicStatus()
	st.Term = bs.GetTerm()
	if st.IsLeader {
		st.LaggingPeers = make(map[uint64]uint64)
		last := r.log.Last()
		r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if pr.Match < last {
				st.LaggingPeers[id] = last - pr.Match
			} else {
				st.LaggingPeers[id] = 0
			}
		})
	}
	return st
}

// LeaderNode returns the node id of the leader as this replica knows it (0 if unknown).
func (r *Replica) LeaderNode() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodeOfLocked(r.leader)
}

// LeaderTerm reports, from one view, whether this replica is the raft leader and its term (the
// persisted one: a leader's is the term it leads in).
func (r *Replica) LeaderTerm() (leader bool, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == raft.StateLeader, r.log.HardState().GetTerm()
}

// IsLeader reports whether this replica is the raft leader.
func (r *Replica) IsLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == raft.StateLeader
}

func (r *Replica) nodeOfLocked(replicaID uint64) uint64 {
	if replicaID == 0 {
		return 0
	}
	if r.desc != nil {
		for _, rd := range r.desc.Replicas {
			if rd.ReplicaId == replicaID {
				return rd.NodeId
			}
		}
	}
	return r.peerNodes[replicaID]
}

func (r *Replica) notLeaderLocked() *Error {
	return &Error{Code: pb.ErrorCode_NOT_LEADER, Msg: fmt.Sprintf("range %d: node %d is not the leader", r.rangeID, r.store.cfg.NodeID),
		LeaderNode: r.nodeOfLocked(r.leader), Desc: r.descCopyLocked()}
}

func (r *Replica) descCopyLocked() *pb.RangeDescriptor {
	if r.desc == nil {
		return nil
	}
	return proto.Clone(r.desc).(*pb.RangeDescriptor)
}

func (r *Replica) checkUsableLocked() *Error {
	select {
	case <-r.store.stopper:
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("node %d is stopping", r.store.cfg.NodeID)}
	default:
	}
	if r.destroyed {
		return &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("range %d: replica removed from node %d", r.rangeID, r.store.cfg.NodeID)}
	}
	if r.desc == nil {
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: replica on node %d not initialized yet", r.rangeID, r.store.cfg.NodeID)}
	}
	return nil
}

// Propose replicates cmd through raft and waits until it is applied on this replica. Only the leader
// proposes. Errors: NOT_LEADER and UNAVAILABLE mean the command was not applied and never will be
// (safe to retry): not proposed, or, if the leadership moved while it waited, overwritten by the
// new leader's log (proposal.orphan); AMBIGUOUS and TIMEOUT mean it may or may not be applied.
func (r *Replica) Propose(ctx context.Context, cmd *pb.Command) (Result, error) {
	return r.propose(ctx, cmd, false)
}

// propose is Propose; handedOver says a leadership hand-over was already waited for.
func (r *Replica) propose(ctx context.Context, cmd *pb.Command, handedOver bool) (Result, error) {
	r.mu.Lock()
	if e := r.checkUsableLocked(); e != nil {
		r.mu.Unlock()
		return Result{}, e
	}
	if r.state != raft.StateLeader {
		e := r.notLeaderLocked()
		r.mu.Unlock()
		return Result{}, e
	}
	if fe := r.frozenErrLocked(); fe != nil && !mergeProtocolCommand(cmd) {
		r.mu.Unlock()
		return Result{}, fe
	}
	r.unquiesceLocked()
	r.nextProposalID++
	id := r.nextProposalID
	cmd.ProposalId = id
	if cmd.ClockUnixMs == 0 {
		cmd.ClockUnixMs = r.ClockMs()
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		r.mu.Unlock()
		return Result{}, &Error{Code: pb.ErrorCode_INTERNAL, Msg: err.Error()}
	}
	p := &proposal{done: make(chan struct{}), term: r.rn.BasicStatus().GetTerm()}
	if !r.IsMeta() && userWrite(cmd) {
		// Admission: a bounded number and size of user writes in raft at once per node. Checked before
		// raft sees the entry, so a refusal is definite (docs/design/admission.md).
		if ref := r.store.proposalGate.TryAcquire(int64(len(data))); ref != nil {
			r.mu.Unlock()
			return Result{}, &Error{Code: pb.ErrorCode_OVERLOADED, Msg: fmt.Sprintf("range %d: %v", r.rangeID, ref)}
		}
		p.gated = int64(len(data))
	}
	if err := r.rn.Propose(data); err != nil {
		p.release(r.store)
		transferring := r.rn.BasicStatus().LeadTransferee != 0
		r.mu.Unlock()
		if transferring && !handedOver {
			// Raft drops proposals while it hands the leadership over. Wait for the hand-over's end
			// (a message exchange) rather than send the client into its retry back-off: once it
			// is over, the new leader is named in the answer and the client goes there at once.
			if e := r.awaitHandOver(ctx); e != nil {
				return Result{}, e
			}
			return r.propose(ctx, cmd, true)
		}
		return Result{}, &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: proposal dropped: %v", r.rangeID, err)}
	}
	r.proposals[id] = p
	r.mu.Unlock()
	r.store.proposals.Add(1)
	r.store.markReady(r)
	return r.waitProposal(ctx, id, p)
}

func (r *Replica) waitProposal(ctx context.Context, id uint64, p *proposal) (Result, error) {
	select {
	case <-p.done:
		if p.err != nil {
			return Result{}, p.err
		}
		if p.result.Err != nil {
			return p.result, p.result.Err
		}
		return p.result, nil
	case <-ctx.Done():
		r.mu.Lock()
		if p.gated == 0 && id != r.confProposal {
			// Ungated (system) proposals are forgotten, so that a lost one cannot keep the range from
			// quiescing. A conf change stays until it applies or fails with its term: raft still holds
			// it pending, and ChangeReplicas waits on it before proposing the next.
			delete(r.proposals, id)
		}
		// A gated user write stays (and holds its share of the proposal gate) until it applies or
		// fails: it is still in the leader's log, and abandoned entries are what piles up under
		// overload. Raft either appends a normal entry or refuses it at once, so it does resolve.
		r.mu.Unlock()
		return Result{}, &Error{Code: pb.ErrorCode_TIMEOUT, Msg: fmt.Sprintf("range %d: write outcome unknown: %v", r.rangeID, ctx.Err())}
	case <-r.store.stopper:
		return Result{}, &Error{Code: pb.ErrorCode_AMBIGUOUS, Msg: "node stopping"}
	}
}

// ChangeReplicas proposes a configuration change (raft ConfChangeV2: several changes at once enter a
// joint configuration, so a move never drops below quorum) whose result is newDesc. It waits until
// the change is applied locally.
func (r *Replica) ChangeReplicas(ctx context.Context, newDesc *pb.RangeDescriptor, changes []*raftpb.ConfChangeSingle) error {
	r.mu.Lock()
	for {
		if e := r.leaderErrLocked(); e != nil {
			r.mu.Unlock()
			return e
		}
		if r.confChangeAcceptedLocked() {
			break
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return &Error{Code: pb.ErrorCode_TIMEOUT, Msg: fmt.Sprintf(
				"range %d: the leader was not ready for a configuration change (its first entry of the term or a joint configuration not yet applied): %v", r.rangeID, ctx.Err())}
		case <-r.store.stopper:
			return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: "node stopping"}
		case <-time.After(5 * time.Millisecond):
		}
		r.mu.Lock()
	}
	if fe := r.frozenErrLocked(); fe != nil {
		r.mu.Unlock()
		return fe
	}
	if newDesc.Generation != r.desc.Generation+1 {
		r.mu.Unlock()
		return &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("range %d: descriptor changed (generation %d, change based on %d)", r.rangeID, r.desc.Generation, newDesc.Generation-1), Desc: r.descCopyLocked()}
	}
	r.unquiesceLocked()
	r.nextProposalID++
	id := r.nextProposalID
	cctx, err := proto.Marshal(&pb.ConfChangeContext{ProposalId: id, Desc: newDesc})
	if err != nil {
		r.mu.Unlock()
		return err
	}
	cc := &raftpb.ConfChangeV2{Changes: changes, Context: cctx}
	if len(changes) > 1 {
		cc.Transition = raftpb.ConfChangeTransitionJointImplicit.Enum()
	}
	if err := r.rn.ProposeConfChange(cc); err != nil {
		r.mu.Unlock()
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: conf change dropped: %v", r.rangeID, err)}
	}
	p := &proposal{done: make(chan struct{}), term: r.rn.BasicStatus().GetTerm()}
	r.proposals[id] = p
	r.confProposal = id
	r.mu.Unlock()
	r.store.markReady(r)
	_, err = r.waitProposal(ctx, id, p)
	return err
}

// leaderErrLocked returns why this replica cannot act as the range's leader now (nil if it can).
func (r *Replica) leaderErrLocked() error {
	if e := r.checkUsableLocked(); e != nil {
		return e
	}
	if r.state != raft.StateLeader {
		return r.notLeaderLocked()
	}
	return nil
}

// confChangeAcceptedLocked reports whether raft would take a configuration change now. etcd raft
// silently replaces a conf change by an empty entry while an earlier one may be unapplied — and a new
// leader counts its whole log as such until it applies an entry of its own term — or while the
// configuration is joint (until the automatic leave-joint change applies). The proposal would then
// wait for an entry that never comes: a move's removal step issued right after a leadership transfer
// hung until its 10-s timeout (measured in the join scenario).
func (r *Replica) confChangeAcceptedLocked() bool {
	if len(r.log.ConfState().GetVotersOutgoing()) > 0 {
		return false
	}
	if _, pending := r.proposals[r.confProposal]; pending {
		return false
	}
	term, err := r.log.Term(r.applied)
	return err == nil && term == r.rn.BasicStatus().GetTerm()
}

// TransferLeadership asks raft to hand leadership to the replica on targetNode.
func (r *Replica) TransferLeadership(targetNode uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	target, err := r.transfereeLocked(targetNode)
	if err != nil {
		return err
	}
	r.transferLocked(target)
	return nil
}

// RetryTransfer asks raft again to hand leadership to the replica on targetNode if it abandoned an
// earlier request (raft gives up after an election timeout when the transferee does not catch up)
// and the transferee answers again. It does nothing while a transfer runs, when this replica no
// longer leads, or while the transferee is unreachable or receiving a snapshot: raft drops every
// proposal while it transfers, so retrying towards a node that cannot take over soon would keep the
// range unwritable.
func (r *Replica) RetryTransfer(targetNode uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != raft.StateLeader || r.rn.BasicStatus().LeadTransferee != 0 {
		return nil
	}
	target, err := r.transfereeLocked(targetNode)
	if err != nil {
		return err
	}
	active := false
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == target {
			// A transferee that needs a snapshot cannot catch up within an election timeout.
			active = pr.RecentActive && pr.State != tracker.StateSnapshot
		}
	})
	if active {
		r.transferLocked(target)
	}
	return nil
}

// TransfereeCaughtUp reports whether the voter on targetNode could take this replica's leadership
// at once: it answers (raft's RecentActive), receives entries normally (no snapshot, no probing) and
// holds every committed entry. Raft drops every proposal while a transfer runs, until the transferee
// has caught up, so a transfer to a replica still catching up (a node just restarted) stalls the
// range's writes for as long; waiting for this first keeps that stall to the hand-over itself.
func (r *Replica) TransfereeCaughtUp(targetNode uint64) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	target, err := r.transfereeLocked(targetNode)
	if err != nil {
		return false, err
	}
	commit := r.rn.BasicStatus().GetCommit()
	ok := false
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == target {
			ok = pr.RecentActive && pr.State == tracker.StateReplicate && pr.Match >= commit
		}
	})
	if !ok {
		r.unquiesceLocked() // an idle range's leader heartbeats the transferee again, which catches it up
	}
	return ok, nil
}

// transfereeLocked is the replica id of the voter on targetNode, if this replica leads.
func (r *Replica) transfereeLocked(targetNode uint64) (uint64, error) {
	if e := r.checkUsableLocked(); e != nil {
		return 0, e
	}
	if r.state != raft.StateLeader {
		return 0, r.notLeaderLocked()
	}
	for _, rd := range r.desc.Replicas {
		if rd.NodeId == targetNode && !rd.Learner {
			return rd.ReplicaId, nil
		}
	}
	return 0, &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: fmt.Sprintf("range %d has no voter on node %d", r.rangeID, targetNode)}
}

func (r *Replica) transferLocked(target uint64) {
	// The transferee's forced election ignores the followers' leases.
	r.dropLeaseLocked(time.Now())
	r.unquiesceLocked()
	r.rn.TransferLeader(target)
	r.store.markReadyLocked(r)
}

// Campaign makes this replica start an election (used to wake a range whose leader is gone).
func (r *Replica) Campaign() {
	r.mu.Lock()
	if !r.noVotesUntil.IsZero() && time.Now().Before(r.noVotesUntil) && r.votersLocked() > 1 {
		r.mu.Unlock()
		return // restarted moments ago: it may have acknowledged a lease it no longer knows of
	}
	if r.desc != nil && !r.destroyed {
		r.unquiesceLocked()
		_ = r.rn.Campaign()
	}
	r.mu.Unlock()
	r.store.markReady(r)
}

// ReadBarrier waits until a read on this replica is linearizable: leadership is confirmed by a quorum
// (ReadIndex) and the state machine has applied up to that index. Concurrent reads share one
// ReadIndex round.
func (r *Replica) ReadBarrier(ctx context.Context) error {
	r.mu.Lock()
	if e := r.leaderErrLocked(); e != nil {
		r.mu.Unlock()
		return e
	}
	if r.leaseReadLocked(time.Now()) {
		r.store.leaseReads.Add(1)
		commit := r.rn.BasicStatus().GetCommit()
		if r.applied >= commit {
			r.mu.Unlock()
			return nil
		}
		// A follower learns of a commit as soon as the leader does, may apply the entry first and
		// serve a read that sees it (a replica read, whose read index is older): a read under the
		// lease waits for the leader's own commit index, so it is never older than what another
		// replica has already shown.
		b := &readBatch{index: commit, done: make(chan struct{})}
		r.readsWait = append(r.readsWait, b)
		r.mu.Unlock()
		r.store.markReady(r)
		return r.awaitRead(ctx, b)
	}
	r.store.readIndexReads.Add(1)
	b := r.queueReadLocked()
	r.mu.Unlock()
	r.store.markReady(r)
	return r.awaitRead(ctx, b)
}

// awaitRead waits for a read batch: released once applied far enough, or failed.
func (r *Replica) awaitRead(ctx context.Context, b *readBatch) error {
	select {
	case <-b.done:
		if e := b.err; e != nil && e.Code == pb.ErrorCode_NOT_LEADER && e.LeaderNode == 0 {
			// The leadership moved while the read waited, and the new leader has not spoken yet
			// (a transfer: this replica stepped down on the transferee's vote request). Name it
			// once it does, so that the client goes there instead of backing off.
			if ne := r.awaitHandOver(ctx); ne != nil {
				return ne
			}
		}
		if b.err != nil {
			return b.err
		}
		return nil
	case <-ctx.Done():
		return &Error{Code: pb.ErrorCode_TIMEOUT, Msg: fmt.Sprintf("range %d: read barrier: %v", r.rangeID, ctx.Err())}
	case <-r.store.stopper:
		return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: "node stopping"}
	}
}

// awaitHandOver waits, up to an election timeout, for a leadership hand-over under way here to end.
// It returns NOT_LEADER naming the new leader once this replica has stepped down and heard from it
// (or, at the bound, whatever it knows), and nil if this replica still leads with no transfer
// running: the caller may propose again.
func (r *Replica) awaitHandOver(ctx context.Context) error {
	end := time.Now().Add(time.Duration(r.store.cfg.ElectionTicks) * r.store.cfg.TickInterval)
	for {
		r.mu.Lock()
		if e := r.checkUsableLocked(); e != nil {
			r.mu.Unlock()
			return e
		}
		leading := r.state == raft.StateLeader
		if leading && r.rn.BasicStatus().LeadTransferee == 0 {
			r.mu.Unlock()
			return nil
		}
		if !leading && (r.leader != 0 || time.Now().After(end) || ctx.Err() != nil) {
			e := r.notLeaderLocked()
			r.mu.Unlock()
			return e
		}
		r.mu.Unlock()
		if leading && (time.Now().After(end) || ctx.Err() != nil) {
			return &Error{Code: pb.ErrorCode_UNAVAILABLE, Msg: fmt.Sprintf("range %d: leadership transfer under way", r.rangeID)}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// queueReadLocked returns the batch of reads waiting for the next ReadIndex round, which the raft
// loop sends (collectReady).
func (r *Replica) queueReadLocked() *readBatch {
	r.unquiesceLocked()
	if r.readQueue == nil {
		r.readCounter++
		c := make([]byte, 16)
		binary.BigEndian.PutUint64(c, r.store.cfg.NodeID)
		binary.BigEndian.PutUint64(c[8:], r.readCounter)
		r.readQueue = &readBatch{ctx: c, done: make(chan struct{})}
	}
	return r.readQueue
}

// CheckKey returns RANGE_MOVED if key is outside the replica's current span.
func (r *Replica) CheckKey(key []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.checkUsableLocked(); e != nil {
		return e
	}
	if fe := r.frozenErrLocked(); fe != nil {
		return fe
	}
	if !containsKey(r.desc, key) {
		return &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("key %q is not in range %d", key, r.rangeID), Desc: r.descCopyLocked()}
	}
	return nil
}

func containsKey(d *pb.RangeDescriptor, key []byte) bool {
	return bytes.Compare(key, d.StartKey) >= 0 && (len(d.EndKey) == 0 || bytes.Compare(key, d.EndKey) < 0)
}

func (r *Replica) dataKey(k []byte) []byte {
	if r.IsMeta() {
		return storage.MetaDataKey(k)
	}
	return storage.UserDataKey(k)
}

// Get reads key from the local state machine (call ReadBarrier first for a linearizable read).
// An expired key is absent.
func (r *Replica) Get(key []byte) ([]byte, bool, error) {
	v, found, err := r.GetStored(key)
	return v.Data, found, err
}

// GetStored reads key with its expiry, version and modification index; an expired key is absent.
func (r *Replica) GetStored(key []byte) (stored.Value, bool, error) {
	if err := r.CheckKey(key); err != nil {
		return stored.Value{}, false, err
	}
	n := r.Reads.Add(1)
	var raw []byte
	var found bool
	var err error
	if a := r.store.cfg.Access; a != nil && !r.IsMeta() && a.SampleRead(r.rangeID, n) {
		var st storage.BlockStats
		if raw, found, st, err = r.store.eng.GetWithStats(r.dataKey(key)); err == nil {
			a.PointRead(r.rangeID, key, st)
		}
	} else {
		raw, found, err = r.store.eng.Get(r.dataKey(key))
	}
	if err != nil || !found {
		return stored.Value{}, false, err
	}
	if r.IsMeta() {
		return stored.Value{Data: raw}, true, nil
	}
	v, live, err := stored.Live(raw, r.ClockMs())
	if err != nil {
		return stored.Value{}, false, fmt.Errorf("range %d: key %q: %w", r.rangeID, key, err)
	}
	return v, live, nil
}

// Scan reads up to limit pairs of [start, end) clamped to the range's span from the local state
// machine. truncated reports that the limit (or maxBytes) stopped it inside the range.
func (r *Replica) Scan(start, end []byte, limit int, maxBytes int, reverse bool) (kvs []*pb.KeyValue, desc *pb.RangeDescriptor, truncated bool, err error) {
	return r.ScanFor(storage.ReadForeground, start, end, limit, maxBytes, reverse)
}

// ScanFor is Scan for reads of src: the engine counts a scan job's block reads apart and reads
// a prefetch's in the idle I/O class (storage.ReadJobs, storage.ReadPrefetch, Engine.IterateFor).
func (r *Replica) ScanFor(src storage.ReadSource, start, end []byte, limit int, maxBytes int, reverse bool) (kvs []*pb.KeyValue, desc *pb.RangeDescriptor, truncated bool, err error) {
	r.mu.Lock()
	if e := r.checkUsableLocked(); e != nil {
		r.mu.Unlock()
		return nil, nil, false, e
	}
	if fe := r.frozenErrLocked(); fe != nil {
		r.mu.Unlock()
		return nil, nil, false, fe
	}
	desc = r.descCopyLocked()
	r.mu.Unlock()
	r.Reads.Add(1)
	r.Scans.Add(1)
	lo, hi := start, end
	if bytes.Compare(lo, desc.StartKey) < 0 {
		lo = desc.StartKey
	}
	if len(desc.EndKey) > 0 && (len(hi) == 0 || bytes.Compare(hi, desc.EndKey) > 0) {
		hi = desc.EndKey
	}
	if len(hi) > 0 && bytes.Compare(lo, hi) >= 0 {
		return nil, desc, false, nil
	}
	elo, ehi := storage.DataSpan(r.IsMeta(), lo, hi)
	err = r.store.eng.IterateFor(elo, ehi, src, func(it *storage.Iterator) error {
		if a := r.store.cfg.Access; a != nil && !r.IsMeta() {
			defer func() { a.Scanned(r.rangeID, len(kvs), it.BlockStats()) }() // before the iterator closes
		}
		var serr error
		kvs, truncated, serr = r.scanIter(it, limit, maxBytes, reverse)
		return serr
	})
	return kvs, desc, truncated, err
}

// scanIter reads up to limit pairs (or maxBytes) from it, forwards or in reverse, skipping expired
// values of user data; truncated reports that a bound stopped it before the iterator's end.
func (r *Replica) scanIter(it *storage.Iterator, limit, maxBytes int, reverse bool) (kvs []*pb.KeyValue, truncated bool, err error) {
	plain, now := r.IsMeta(), r.ClockMs()
	size := 0
	valid := it.First()
	step := it.Next
	if reverse {
		valid = it.Last()
		step = it.Prev
	}
	for ; valid; valid = step() {
		if (limit > 0 && len(kvs) >= limit) || (maxBytes > 0 && size >= maxBytes) {
			return kvs, true, it.Error()
		}
		v := it.Value()
		if !plain {
			sv, live, err := stored.Live(v, now)
			if err != nil {
				return kvs, false, fmt.Errorf("range %d: key %q: %w", r.rangeID, it.Key(), err)
			}
			if !live {
				continue
			}
			v = sv.Data
		}
		k := append([]byte(nil), storage.StripDataPrefix(it.Key())...)
		v = append([]byte(nil), v...)
		size += len(k) + len(v)
		kvs = append(kvs, &pb.KeyValue{Key: k, Value: v})
	}
	return kvs, false, it.Error()
}

// ApproximateBytes estimates the range's data size on disk.
func (r *Replica) ApproximateBytes() uint64 {
	d := r.Desc()
	if d == nil {
		return 0
	}
	lo, hi := storage.DataSpan(r.IsMeta(), d.StartKey, d.EndKey)
	return r.store.eng.ApproximateBytes(lo, hi)
}

// ---- called from the store loop with r.mu held ----

// applyCommittedLocked applies committed entries in one engine batch and answers waiting proposers.
func (r *Replica) applyCommittedLocked(ents []*raftpb.Entry) (splits []*pb.RangeDescriptor, merged []uint64, removed bool, err error) {
	if len(ents) == 0 {
		return nil, nil, false, nil
	}
	b := r.store.eng.NewIndexedBatch()
	defer b.Close()
	r.changes = r.changes[:0]
	type done struct {
		p   *proposal
		res Result
	}
	var finished []done
	for _, e := range ents {
		if e.GetIndex() <= r.applied {
			continue
		}
		if t := e.GetTerm(); t > r.appliedTerm {
			r.appliedTerm = t
			r.failOrphansBeforeLocked(t)
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.Data) == 0 {
				break
			}
			cmd := &pb.Command{}
			if err := proto.Unmarshal(e.Data, cmd); err != nil {
				// Every replica sees the same bytes, so skipping is deterministic; stopping the node would
				// make the entry fatal on every restart.
				r.store.cfg.Logger.Error("skipping undecodable command", "range", r.rangeID, "index", e.GetIndex(), "err", err)
				r.applied = e.GetIndex()
				continue
			}
			r.applyingIndex = e.GetIndex()
			res, right, mergedRight, err := r.applyCommand(b, cmd, e.GetIndex())
			if err != nil {
				return nil, nil, false, err
			}
			if right != nil {
				splits = append(splits, right)
			}
			if mergedRight != 0 {
				merged = append(merged, mergedRight)
			}
			if p, ok := r.proposals[cmd.ProposalId]; ok && cmd.ProposalId != 0 {
				delete(r.proposals, cmd.ProposalId)
				p.release(r.store)
				finished = append(finished, done{p, res})
			}
		case raftpb.EntryConfChangeV2, raftpb.EntryConfChange:
			var cc raftpb.ConfChangeI
			var ctxData []byte
			if e.GetType() == raftpb.EntryConfChangeV2 {
				c := &raftpb.ConfChangeV2{}
				if err := proto.Unmarshal(e.Data, c); err != nil {
					return nil, nil, false, fmt.Errorf("range %d: decode conf change: %w", r.rangeID, err)
				}
				cc, ctxData = c, c.Context
			} else {
				c := &raftpb.ConfChange{}
				if err := proto.Unmarshal(e.Data, c); err != nil {
					return nil, nil, false, fmt.Errorf("range %d: decode conf change: %w", r.rangeID, err)
				}
				cc, ctxData = c, c.Context
			}
			cctx := &pb.ConfChangeContext{}
			if len(ctxData) > 0 {
				if err := proto.Unmarshal(ctxData, cctx); err != nil {
					return nil, nil, false, fmt.Errorf("range %d: decode conf change context: %w", r.rangeID, err)
				}
			}
			var res Result
			joint := len(r.log.ConfState().GetVotersOutgoing()) > 0
			leaveJoint := cctx.Desc == nil && len(cc.AsV2().Changes) == 0
			var cs *raftpb.ConfState
			var ok bool
			switch {
			case r.desc != nil && r.desc.MergingInto != 0 && !(leaveJoint && joint):
				// A frozen range's membership must not change under a merge.
				r.rn.ApplyConfChange(&raftpb.ConfChange{})
				res.Err = r.frozenErrLocked()
			case cctx.Desc != nil && r.desc != nil && cctx.Desc.Generation == r.desc.Generation+1:
				if cs, ok = r.applyConfChangeLocked(cc); ok {
					r.desc = cctx.Desc
				}
			case leaveJoint && joint:
				// Leaving a joint configuration: raft proposes this empty change itself.
				cs, ok = r.applyConfChangeLocked(cc)
			default:
				// Based on a stale descriptor: a change of node 0 is raft's documented no-op.
				r.rn.ApplyConfChange(&raftpb.ConfChange{})
				res.Err = &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("range %d: conf change based on a stale descriptor", r.rangeID)}
			}
			if ok {
				r.log.SetConfState(cs)
				if err := r.writeDescLocked(b); err != nil {
					return nil, nil, false, err
				}
				removed = !inConfState(cs, r.replicaID)
			} else if res.Err == nil {
				res.Err = &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: fmt.Sprintf("range %d: invalid configuration change", r.rangeID)}
			}
			if p, ok := r.proposals[cctx.ProposalId]; ok && cctx.ProposalId != 0 {
				delete(r.proposals, cctx.ProposalId)
				p.release(r.store)
				finished = append(finished, done{p, res})
			}
		}
		r.applied = e.GetIndex()
	}
	if err := b.Set(storage.AppliedStateKey(r.rangeID), u64(r.applied)); err != nil {
		return nil, nil, false, err
	}
	if r.applied-r.log.TruncatedIndex() > r.store.cfg.LogTruncateThreshold {
		if to := r.truncationPointLocked(); to > r.log.TruncatedIndex() {
			if err := r.log.Truncate(b, to); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if err := b.Commit(false); err != nil {
		return nil, nil, false, err
	}
	r.log.ForgetApplied(r.applied)
	r.publishChangesLocked()
	for _, f := range finished {
		f.p.result = f.res
		close(f.p.done)
	}
	return splits, merged, removed, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func inConfState(cs *raftpb.ConfState, id uint64) bool {
	for _, set := range [][]uint64{cs.Voters, cs.VotersOutgoing, cs.Learners, cs.LearnersNext} {
		for _, v := range set {
			if v == id {
				return true
			}
		}
	}
	return false
}

func (r *Replica) writeDescLocked(b *storage.Batch) error {
	dd, err := proto.Marshal(r.desc)
	if err != nil {
		return err
	}
	if err := b.Set(storage.RangeDescKey(r.rangeID), dd); err != nil {
		return err
	}
	cs, err := proto.Marshal(r.log.ConfState())
	if err != nil {
		return err
	}
	return b.Set(storage.ConfStateKey(r.rangeID), cs)
}

// applyCommand executes one command deterministically. A command that cannot apply (a key outside
// the span after a split, a stale split) yields a Result error and changes nothing.
func (r *Replica) applyCommand(b *storage.Batch, cmd *pb.Command, index uint64) (Result, *pb.RangeDescriptor, uint64, error) {
	if r.desc == nil {
		return Result{}, nil, 0, fmt.Errorf("range %d: apply on uninitialized replica", r.rangeID)
	}
	if res, mergedRight, handled, err := r.applyMergeProtocol(b, cmd, index); handled || err != nil {
		return res, nil, mergedRight, err
	}
	res, right, err := r.applyDataCommand(b, cmd, index)
	return res, right, 0, err
}

// applyDataCommand applies writes, conditions, transactions, counters, meta updates and splits.
func (r *Replica) applyDataCommand(b *storage.Batch, cmd *pb.Command, index uint64) (Result, *pb.RangeDescriptor, error) {
	var res Result
	outside := func(k []byte) bool { return !containsKey(r.desc, k) }
	moved := func(k []byte) Result {
		return Result{Err: &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("key %q is not in range %d", k, r.rangeID), Desc: r.descCopyLocked()}}
	}
	for _, m := range cmd.Mutations {
		if outside(m.Key) {
			return moved(m.Key), nil, nil
		}
	}
	if c := cmd.Condition; c != nil && outside(c.Key) {
		return moved(c.Key), nil, nil
	}
	if cmd.Txn != nil {
		for _, k := range eval.Keys(cmd.Txn) {
			if outside(k) {
				return moved(k), nil, nil
			}
		}
	}
	if cmd.SetFence != nil || cmd.LiftFence != 0 {
		res, err := r.applyFenceLocked(b, cmd, index)
		return res, nil, err
	}
	if e := r.fencedErrLocked(cmd); e != nil {
		return Result{Err: e}, nil, nil
	}
	r.observeClock(cmd.ClockUnixMs)
	env := eval.Env{DataKey: r.dataKey, Index: index, Plain: r.IsMeta()}
	if r.store.cfg.Changes != nil && !env.Plain {
		if r.record == nil {
			r.record = r.recordChange // once: a method value allocates each time it is taken
		}
		env.Record = r.record
	}
	out, err := eval.Apply(b, cmd, env)
	if err != nil {
		return res, nil, err
	}
	res.Found, res.Current, res.Swapped, res.Counter, res.Txn = out.Found, out.Current, out.Swapped, out.Counter, out.Txn
	if cmd.Condition != nil && !out.Swapped {
		return res, nil, nil
	}
	if out.Wrote || len(cmd.Mutations) > 0 {
		r.Writes.Add(1)
	}
	if mu := cmd.MetaUpdate; mu != nil {
		if !r.IsMeta() {
			return Result{Err: &Error{Code: pb.ErrorCode_INVALID_ARGUMENT, Msg: "meta update outside the meta range"}}, nil, nil
		}
		for _, d := range mu.Ranges {
			if err := applyMetaDescriptor(b, d); err != nil {
				return res, nil, err
			}
		}
	}
	if st := cmd.Split; st != nil {
		return r.applySplit(b, st)
	}
	return res, nil, nil
}

// applySplit shrinks this range to the left descriptor and writes the initial raft state of the right
// range; the store creates the right replica after the batch commits.
func (r *Replica) applySplit(b *storage.Batch, st *pb.SplitTrigger) (Result, *pb.RangeDescriptor, error) {
	left, right := st.Left, st.Right
	if left.Generation != r.desc.Generation+1 || !bytes.Equal(left.StartKey, r.desc.StartKey) ||
		!bytes.Equal(right.EndKey, r.desc.EndKey) || !containsKey(r.desc, st.SplitKey) || bytes.Equal(st.SplitKey, r.desc.StartKey) {
		return Result{Err: &Error{Code: pb.ErrorCode_RANGE_MOVED, Msg: fmt.Sprintf("range %d: split based on a stale descriptor", r.rangeID), Desc: r.descCopyLocked()}}, nil, nil
	}
	if r.store.hasTombstone(right.RangeId) || r.store.initializedReplica(right.RangeId) {
		// The right range already moved on without this node; its data arrives by snapshot if needed.
		r.desc = left
		if err := r.writeDescLocked(b); err != nil {
			return Result{}, nil, err
		}
		r.recordSpan(pb.RangeFeedEvent_SPLIT, left, right)
		return Result{}, nil, nil
	}
	r.desc = left
	if err := r.writeDescLocked(b); err != nil {
		return Result{}, nil, err
	}
	// The right range's initial state keeps a vote its uninitialized replica may have cast: that
	// vote must be in the engine, not still in the log pipeline (where it would land after, and
	// overwrite, the initial state).
	if !r.store.flushLog() {
		return Result{}, nil, errStopped
	}
	if err := writeInitialState(b, right); err != nil {
		return Result{}, nil, err
	}
	r.recordSpan(pb.RangeFeedEvent_SPLIT, left, right)
	return Result{}, right, nil
}

// writeInitialState writes the raft state of a range that starts at (raftlog.InitialIndex,
// raftlog.InitialTerm) with the replicas of desc: used by bootstrap and by the right side of a split.
func writeInitialState(b *storage.Batch, desc *pb.RangeDescriptor) error {
	id := desc.RangeId
	cs := confStateOf(desc)
	csData, err := proto.Marshal(cs)
	if err != nil {
		return err
	}
	dd, err := proto.Marshal(desc)
	if err != nil {
		return err
	}
	if err := raftlog.WriteInitialState(b, id); err != nil {
		return err
	}
	for _, w := range []error{
		b.Set(storage.AppliedStateKey(id), u64(raftlog.InitialIndex)),
		b.Set(storage.ConfStateKey(id), csData),
		b.Set(storage.RangeDescKey(id), dd),
	} {
		if w != nil {
			return w
		}
	}
	return nil
}

func confStateOf(d *pb.RangeDescriptor) *raftpb.ConfState {
	cs := &raftpb.ConfState{}
	for _, rd := range d.Replicas {
		if rd.Learner {
			cs.Learners = append(cs.Learners, rd.ReplicaId)
		} else {
			cs.Voters = append(cs.Voters, rd.ReplicaId)
		}
	}
	return cs
}

// newProposalIDs returns where a replica's proposal ids start: a random point in [1, 2^62), so that
// two replicas' (or two incarnations') sequences of ids overlap with a negligible probability.
func newProposalIDs() uint64 {
	return 1 + rand.Uint64N(1<<62-1)
}

// failPendingLocked answers every waiting proposer and reader after a removal, a merge or a stop.
// An orphaned proposal (see proposal.orphan) may have committed under the new leader: it gets
// AMBIGUOUS whatever code says.
func (r *Replica) failPendingLocked(code pb.ErrorCode, msg string) {
	for id, p := range r.proposals {
		c := code
		if p.orphan {
			c = pb.ErrorCode_AMBIGUOUS
		}
		r.finishProposalLocked(id, p, c, msg)
	}
	r.failReadsLocked()
}

func (r *Replica) finishProposalLocked(id uint64, p *proposal, code pb.ErrorCode, msg string) {
	p.err = &Error{Code: code, Msg: fmt.Sprintf("range %d: %s", r.rangeID, msg), LeaderNode: r.nodeOfLocked(r.leader)}
	close(p.done)
	delete(r.proposals, id)
	p.release(r.store)
}

// orphanPendingLocked keeps the proposals of a lost leadership waiting for their entries' fate
// (proposal.orphan), and fails the reads, which are retried at once.
func (r *Replica) orphanPendingLocked() {
	for _, p := range r.proposals {
		p.orphan = true
	}
	r.failReadsLocked()
}

// failOrphansBeforeLocked answers the orphaned proposals of terms before term, which an entry of
// term is about to apply: theirs were not committed before it, so they never will be, and NOT_LEADER
// (not applied, safe to retry) is exact.
func (r *Replica) failOrphansBeforeLocked(term uint64) {
	for id, p := range r.proposals {
		if p.orphan && p.term < term {
			r.finishProposalLocked(id, p, pb.ErrorCode_NOT_LEADER,
				fmt.Sprintf("not applied: the leadership moved (term %d, then %d) before the write committed", p.term, term))
		}
	}
}

func (r *Replica) failReadsLocked() {
	fail := func(b *readBatch) {
		b.err = r.notLeaderLocked()
		close(b.done)
	}
	if r.readQueue != nil {
		fail(r.readQueue)
		r.readQueue = nil
	}
	for k, b := range r.readsSent {
		fail(b)
		delete(r.readsSent, k)
	}
	for _, b := range r.readsWait {
		fail(b)
	}
	r.readsWait = nil
}

// releaseReadsLocked completes reads whose index has been applied.
func (r *Replica) releaseReadsLocked() {
	keep := r.readsWait[:0]
	for _, b := range r.readsWait {
		if b.index <= r.applied {
			if b.leaderTerm != 0 && b.leaderTerm == r.rn.BasicStatus().GetTerm() {
				r.extendLeaseLocked(b.sent, b.index)
			}
			close(b.done)
		} else {
			keep = append(keep, b)
		}
	}
	r.readsWait = keep
}

// SplitKeyBySize returns a key near the middle of the range's data by bytes, or nil if the range
// has fewer than two keys.
func (r *Replica) SplitKeyBySize() ([]byte, error) {
	d := r.Desc()
	if d == nil {
		return nil, nil
	}
	lo, hi := storage.DataSpan(r.IsMeta(), d.StartKey, d.EndKey)
	total := 0
	count := 0
	it, err := r.store.eng.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		total += len(it.Key()) + len(it.Value())
		count++
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if count < 2 {
		return nil, nil
	}
	it, err = r.store.eng.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	acc := 0
	for ok := it.First(); ok; ok = it.Next() {
		acc += len(it.Key()) + len(it.Value())
		if acc >= total/2 {
			if it.Next() {
				return append([]byte(nil), storage.StripDataPrefix(it.Key())...), nil
			}
			break
		}
	}
	return nil, it.Error()
}

// applyConfChangeLocked applies cc, or — if raft rejects it as invalid (it panics before changing
// anything) — applies raft's no-op change instead, so a bad entry cannot stop the node.
func (r *Replica) applyConfChangeLocked(cc raftpb.ConfChangeI) (cs *raftpb.ConfState, ok bool) {
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.store.cfg.Logger.Error("invalid configuration change skipped", "range", r.rangeID, "err", p)
			}
		}()
		cs = r.rn.ApplyConfChange(cc)
		ok = true
	}()
	if !ok {
		r.rn.ApplyConfChange(&raftpb.ConfChange{})
	}
	return cs, ok
}
