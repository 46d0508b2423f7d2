package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/shoaldb/shoal/admission"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/logpipe"
	"github.com/shoaldb/shoal/replica/internal/raftlog"
	"github.com/shoaldb/shoal/replica/internal/slograft"
	"github.com/shoaldb/shoal/replica/internal/snapstream"
	"github.com/shoaldb/shoal/replica/internal/validate"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/transport"
)

// Transport is what the store needs from the node-to-node transport.
type Transport interface {
	Send(msg *pb.RaftMessage) bool
	SendSnapshot(ctx context.Context, header *pb.RaftMessage, src transport.SnapshotSource) error
}

// Config configures a Store. Zero values take the documented defaults.
type Config struct {
	// NodeID, Engine and Transport are the node's (set by the node, not configured).
	NodeID    uint64          `json:"-"`
	Engine    *storage.Engine `json:"-"`
	Transport Transport       `json:"-"`
	// TickInterval is one raft tick (default 100ms).
	TickInterval time.Duration
	// ElectionTicks (default 10) and HeartbeatTicks (default 1) are in ticks.
	ElectionTicks, HeartbeatTicks int
	// LogTruncateThreshold: when more applied entries than this are kept, the older half is dropped
	// (default 4096). Followers further behind catch up by snapshot.
	LogTruncateThreshold uint64
	// MaxConcurrentSnapshots bounds outgoing snapshots per node (default 2).
	MaxConcurrentSnapshots int
	// DisableLeaseReads makes every linearizable read run a ReadIndex round (see lease.go).
	DisableLeaseReads bool
	// ProposalLimits bound the user writes this node's leaders hold in raft at once (proposed, not
	// yet applied or failed); beyond them Propose refuses with OVERLOADED. Zero: unlimited.
	ProposalLimits admission.Limits `json:"-"`
	// CommitStallTimeout: a raft-loop commit blocked this long (a disk full for sstables only: the WAL
	// takes writes until the memtables fill, then Commit blocks with no error) fails the node with a
	// FATAL line, so that it stops rather than hang with its gRPC open. Default 60 s.
	CommitStallTimeout time.Duration
	// OnCommitStall is called once when a commit stalls past CommitStallTimeout. Default: print the
	// FATAL line to stderr and exit the process with status 2, as Pebble does on a disk fault.
	OnCommitStall func(stalled time.Duration) `json:"-"`
	// Changes, if set, receives every user range's applied changes (the change streams' source).
	Changes ChangeSink `json:"-"`
	// Access, if set, receives per-range access statistics: a sample of the point reads measured by
	// the blocks they loaded, and every scan's rows and blocks (node/accessstats keeps them).
	Access AccessRecorder `json:"-"`
	// OnReplicaRemoved is called (outside locks) after a replica removed itself from this node.
	OnReplicaRemoved func(rangeID uint64) `json:"-"`
	Logger           *slog.Logger         `json:"-"`
	// SnapshotIngestMinBytes: a snapshot of at least this many bytes that initializes a replica is
	// written as an sstable and ingested (storage.IngestSpan) instead of through a batch. Default
	// 64 KiB; negative: never.
	SnapshotIngestMinBytes int64
}

// AccessRecorder receives the reads of user ranges as they happen; it must be cheap and never block.
type AccessRecorder interface {
	// SampleRead reports whether the n-th point read of the range is to be measured (GetWithStats
	// costs an iterator more than a plain Get).
	SampleRead(rangeID, n uint64) bool
	// PointRead is a measured point read of key (the user key) and the blocks it loaded.
	PointRead(rangeID uint64, key []byte, st storage.BlockStats)
	// Scanned is a scan that returned rows and loaded st's blocks.
	Scanned(rangeID uint64, rows int, st storage.BlockStats)
}

// WithDefaults returns c with every zero setting at its default (callbacks and logger aside).
func (c Config) WithDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.LogTruncateThreshold == 0 {
		c.LogTruncateThreshold = 4096
	}
	if c.MaxConcurrentSnapshots == 0 {
		c.MaxConcurrentSnapshots = 2
	}
	if c.CommitStallTimeout == 0 {
		c.CommitStallTimeout = 60 * time.Second
	}
	if c.SnapshotIngestMinBytes == 0 {
		c.SnapshotIngestMinBytes = 64 << 10
	}
	return c
}

// Validate reports every setting that cannot work (zero values are fine: they take defaults).
func (c Config) Validate() error {
	var errs []error
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("tick interval must not be negative (got %s)", c.TickInterval))
	}
	if c.ElectionTicks < 0 || c.HeartbeatTicks < 0 || c.MaxConcurrentSnapshots < 0 || c.CommitStallTimeout < 0 {
		errs = append(errs, errors.New("raft election and heartbeat ticks, snapshot concurrency and commit stall timeout must not be negative"))
	}
	if d := c.WithDefaults(); d.ElectionTicks <= d.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("raft election ticks %d must exceed heartbeat ticks %d", d.ElectionTicks, d.HeartbeatTicks))
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	*c = c.WithDefaults()
	if c.OnCommitStall == nil {
		c.OnCommitStall = func(d time.Duration) {
			fmt.Fprintf(os.Stderr, "FATAL: storage engine stalled: a raft commit has been blocked for %v (full or failing disk?): the node exits so that it does not hang half-alive; fix the cause and restart it\n", d.Round(time.Second))
			os.Exit(2)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Store holds every replica of one node and runs the node's raft loop.
type Store struct {
	cfg Config
	eng *storage.Engine

	mu       sync.RWMutex
	replicas map[uint64]*Replica
	// destroyed holds, per range, the highest replica id destroyed on this node since it started. A
	// replica leaves replicas before its tombstone reaches the engine; until then only this keeps a
	// message to it from creating a new replica on the old one's log, which the destruction deletes.
	destroyed map[uint64]uint64

	dirtyMu sync.Mutex
	dirty   map[uint64]*Replica
	// The loop's own: the dirty set it took last (emptied, for the next swap) and its work list.
	spareDirty map[uint64]*Replica
	work       []readyWork

	activeMu sync.Mutex
	active   map[uint64]*Replica // replicas that are ticked (not quiesced)
	wake     chan struct{}
	// heard is when a raft message from each node last arrived (quiesce.go: the clock a sleeping
	// replica woken for a silent leader catches up by).
	heardMu sync.Mutex
	heard   map[uint64]time.Time

	proposalGate *admission.Gate // see Config.ProposalLimits
	commitSince  atomic.Int64    // unix nanos when the log writer's current commit began; 0 when none runs

	log        *logpipe.Pipe[logWaiters] // the raft log pipeline (pipeline.go)
	stepsMu    sync.Mutex
	steps      []localStep // committed responses for this node's replicas, stepped by the loop
	spareSteps []localStep

	// Metrics of the raft loop (read with LoopStats).
	cycles, entriesWritten, entriesApplied     atomic.Uint64
	proposals, leaderChanges, snapshotsApplied atomic.Uint64
	leaseReads, readIndexReads                 atomic.Uint64
	replicaReads, boundedLocalReads            atomic.Uint64
	droppedInvalid                             atomic.Uint64

	// loaded: Load has built every replica on disk. Raft traffic before it is dropped (see Load).
	loaded atomic.Bool

	snapSem chan struct{}
	stopper chan struct{}
	wg      sync.WaitGroup
	stopped sync.Once
}

// NewStore creates a store; Load and Start make it run.
func NewStore(cfg Config) *Store {
	cfg.setDefaults()
	s := &Store{
		cfg:        cfg,
		eng:        cfg.Engine,
		replicas:   make(map[uint64]*Replica),
		dirty:      make(map[uint64]*Replica),
		spareDirty: make(map[uint64]*Replica),
		active:     make(map[uint64]*Replica),
		heard:      make(map[uint64]time.Time),
		wake:       make(chan struct{}, 1),
		snapSem:    make(chan struct{}, cfg.MaxConcurrentSnapshots),
		stopper:    make(chan struct{}),

		proposalGate: admission.NewGate("proposals", cfg.ProposalLimits),
	}
	s.log = s.newLogPipe()
	return s
}

// NodeID is the store's node.
func (s *Store) NodeID() uint64 { return s.cfg.NodeID }

// Load creates a replica for every range that has a descriptor on disk. Until it returns, the store
// drops raft messages and refuses snapshots, as a lossy network would (raft resends): the node hands
// the store to its transport before loading it, and a message for a range not yet loaded built a
// second replica of the range beside the one Load then stored. That one could acknowledge appends
// the serving replica never held: the leader counted a match beyond the follower's log and its
// heartbeats were dropped as invalid ("heartbeat commits N+1 beyond last index N") until the
// leadership moved; it could also vote without the restart's blackout below.
func (s *Store) Load() error {
	lo, hi := storage.RaftKeyspaceSpan()
	it, err := s.eng.NewIter(lo, hi)
	if err != nil {
		return err
	}
	var ids []uint64
	for ok := it.First(); ok; {
		id := storage.RangeIDFromRaftKey(it.Key())
		ids = append(ids, id)
		_, next := storage.RaftStateSpan(id)
		ok = it.SeekGE(next)
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, id := range ids {
		v, ok, err := s.eng.Get(storage.RangeDescKey(id))
		if err != nil {
			return err
		}
		if !ok {
			continue // a vote cast by a replica that never got its snapshot: recreated on demand
		}
		desc := &pb.RangeDescriptor{}
		if err := proto.Unmarshal(v, desc); err != nil {
			return fmt.Errorf("range %d: decode descriptor: %w", id, err)
		}
		var replicaID uint64
		for _, rd := range desc.Replicas {
			if rd.NodeId == s.cfg.NodeID {
				replicaID = rd.ReplicaId
			}
		}
		if replicaID == 0 {
			continue
		}
		r, err := s.newReplica(id, replicaID)
		if err != nil {
			return err
		}
		// A restarted replica forgot which leader it last heard from; until an election timeout has
		// passed it neither votes nor campaigns (lease.go).
		r.noVotesUntil = time.Now().Add(time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval)
		s.mu.Lock()
		s.replicas[id] = r
		s.mu.Unlock()
	}
	s.loaded.Store(true)
	return nil
}

// maxAppendBytes and maxInflightAppendBytes bound a leader's appends to a follower: a follower that
// comes back (a restarted node) acknowledges the leader's probe and raft then sends it as much of
// its backlog as may be in flight, at once, under the replica's mutex: the entries read from the
// log, then encoded, while the range's reads and writes wait. A backlog of 2 MB (a closed loop's
// writes over a 5-s restart) held a leader's range for 27-29 ms in the compose rolling restart.
// Bounding the bytes in flight spreads it over the follower's acknowledgements, a bounded step each.
const (
	maxAppendBytes         = 64 << 10
	maxInflightAppendBytes = 256 << 10
)

// newReplica builds a replica from its state on disk (or an empty, uninitialized one).
//
// Everything is read from one engine snapshot: replicaForMessage may build a replica while the
// split that creates the range is committing, and a mix of pre- and post-split state (hard state
// commit 0, applied index 10) makes raft panic.
func (s *Store) newReplica(rangeID, replicaID uint64) (*Replica, error) {
	snap := s.eng.NewSnapshot()
	defer snap.Close()
	l, err := raftlog.Load(s.eng, snap, rangeID)
	if err != nil {
		return nil, err
	}
	r := &Replica{store: s, rangeID: rangeID, replicaID: replicaID, log: l, nextProposalID: newProposalIDs(), readCounter: newProposalIDs(),
		proposals: make(map[uint64]*proposal), readsSent: make(map[string]*readBatch), peerNodes: make(map[uint64]uint64)}
	if v, ok, err := snap.Get(storage.RangeDescKey(rangeID)); err != nil {
		return nil, err
	} else if ok {
		r.desc = &pb.RangeDescriptor{}
		if err := proto.Unmarshal(v, r.desc); err != nil {
			return nil, fmt.Errorf("range %d: decode descriptor: %w", rangeID, err)
		}
		if v, ok, err := snap.Get(storage.ConfStateKey(rangeID)); err != nil {
			return nil, err
		} else if ok {
			cs := &raftpb.ConfState{}
			if err := proto.Unmarshal(v, cs); err != nil {
				return nil, fmt.Errorf("range %d: decode conf state: %w", rangeID, err)
			}
			l.SetConfState(cs)
		}
		if v, ok, err := snap.Get(storage.AppliedStateKey(rangeID)); err != nil {
			return nil, err
		} else if ok && len(v) == 8 {
			r.applied = be64(v)
		}
	}
	// The applied index is written when entries apply, the commit index with the next log batch: a
	// crash between the two leaves applied above the commit index on disk, which raft refuses.
	// Whatever applied was committed.
	l.EnsureCommit(r.applied)
	l.SetSnapshotFunc(r.snapshotMetaLocked)
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        replicaID,
		ElectionTick:              s.cfg.ElectionTicks,
		HeartbeatTick:             s.cfg.HeartbeatTicks,
		Storage:                   l,
		Applied:                   r.applied,
		MaxSizePerMsg:             maxAppendBytes,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		MaxInflightBytes:          maxInflightAppendBytes,
		AsyncStorageWrites:        true, // the node's log pipeline (pipeline.go)
		DisableProposalForwarding: true, // proposals are made on the leader only; none cross the network
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		Logger:                    slograft.Logger{L: s.cfg.Logger},
		StepDownOnRemoval:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("range %d: start raft: %w", rangeID, err)
	}
	r.rn = rn
	s.activeMu.Lock()
	s.active[rangeID] = r
	s.activeMu.Unlock()
	s.resetChanges(r, r.desc, r.applied, r.applied)
	return r, nil
}

func be64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// snapshotMetaLocked answers raft's Storage.Snapshot: metadata at the applied index. The data is
// attached when the MsgSnap leaves (see sendSnapshot).
func (r *Replica) snapshotMetaLocked() (*raftpb.Snapshot, error) {
	if r.desc == nil {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, err := r.log.Term(r.applied)
	if err != nil {
		return nil, err
	}
	data, err := proto.Marshal(r.desc)
	if err != nil {
		return nil, err
	}
	return &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(r.applied), Term: proto.Uint64(term), ConfState: proto.Clone(r.log.ConfState()).(*raftpb.ConfState)}}, nil
}

// Bootstrap writes the initial state of a range on a brand-new store (first node of a cluster).
func (s *Store) Bootstrap(desc *pb.RangeDescriptor, data []*pb.KeyValue) error {
	b := s.eng.NewIndexedBatch()
	defer b.Close()
	if err := writeInitialState(b, desc); err != nil {
		return err
	}
	for _, kv := range data {
		k := storage.UserDataKey(kv.Key)
		if desc.RangeId == MetaRangeID {
			k = storage.MetaDataKey(kv.Key)
		}
		if err := b.Set(k, kv.Value); err != nil {
			return err
		}
	}
	return b.Commit(true)
}

// Start runs the raft loop and its log writer.
func (s *Store) Start() {
	s.log.Start()
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.loop()
	}()
	go func() {
		defer s.wg.Done()
		s.log.Run()
	}()
	go func() {
		defer s.wg.Done()
		s.watchCommits()
	}()
}

// watchCommits fails the node when a raft-loop commit stays blocked past CommitStallTimeout.
func (s *Store) watchCommits() {
	t := time.NewTicker(min(time.Second, s.cfg.CommitStallTimeout/4))
	defer t.Stop()
	for {
		select {
		case <-s.stopper:
			return
		case <-t.C:
		}
		if since := s.commitSince.Load(); since != 0 {
			if d := time.Since(time.Unix(0, since)); d >= s.cfg.CommitStallTimeout {
				s.cfg.Logger.Error("raft commit stalled: failing the node", "blocked", d.Round(time.Second))
				s.cfg.OnCommitStall(d)
				return
			}
		}
	}
}

// Stop stops the loop and waits for it; pending requests get UNAVAILABLE or AMBIGUOUS.
func (s *Store) Stop() {
	s.stopped.Do(func() { close(s.stopper) })
	s.wg.Wait()
}

// Replica returns the local replica of rangeID, or nil.
func (s *Store) Replica(rangeID uint64) *Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.replicas[rangeID]
}

// Replicas lists every local replica, sorted by range id.
func (s *Store) Replicas() []*Replica {
	s.mu.RLock()
	out := make([]*Replica, 0, len(s.replicas))
	for _, r := range s.replicas {
		out = append(out, r)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rangeID < out[j].rangeID })
	return out
}

// ReplicaForKey returns the local initialized user-range replica whose span holds key, or nil (the
// one of the lowest range id, should two spans overlap for a moment).
func (s *Store) ReplicaForKey(key []byte) *Replica {
	// On the path of every request that names no range: no sorting, no descriptor copies.
	s.mu.RLock()
	reps := make([]*Replica, 0, len(s.replicas))
	for _, r := range s.replicas {
		if !r.IsMeta() {
			reps = append(reps, r)
		}
	}
	s.mu.RUnlock()
	var found *Replica
	for _, r := range reps {
		if found != nil && found.rangeID < r.rangeID {
			continue
		}
		r.mu.Lock()
		ok := r.desc != nil && containsKey(r.desc, key)
		r.mu.Unlock()
		if ok {
			found = r
		}
	}
	return found
}

func (s *Store) initializedReplica(rangeID uint64) bool {
	s.mu.RLock()
	r := s.replicas[rangeID]
	s.mu.RUnlock()
	if r == nil {
		return false
	}
	// Called with another replica's lock held: r may be that one only if ids are equal, never here.
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.desc != nil
}

func (s *Store) hasTombstone(rangeID uint64) bool {
	_, ok, _ := s.eng.Get(storage.ReplicaTombstoneKey(rangeID))
	return ok
}

func (s *Store) tombstoneReplicaID(rangeID uint64) uint64 {
	v, ok, _ := s.eng.Get(storage.ReplicaTombstoneKey(rangeID))
	if !ok || len(v) != 8 {
		return 0
	}
	return be64(v)
}

func (s *Store) markReady(r *Replica) {
	s.dirtyMu.Lock()
	s.dirty[r.rangeID] = r
	s.dirtyMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// markReadyLocked is markReady for callers holding r.mu (the dirty set has its own lock).
func (s *Store) markReadyLocked(r *Replica) { s.markReady(r) }

// takesTraffic reports whether the store takes raft messages and snapshots: once it has loaded its
// replicas (see Load) and until it stops. A stopped store's replicas would step messages no loop
// answers, and a retired node's streams may deliver a few after its store stopped, even after its
// engine closed.
func (s *Store) takesTraffic() bool {
	select {
	case <-s.stopper:
		return false
	default:
		return s.loaded.Load()
	}
}

// HandleRaftMessages implements transport.Handler.
func (s *Store) HandleRaftMessages(msgs []*pb.RaftMessage) {
	if !s.takesTraffic() {
		return
	}
	s.heardFrom(msgs)
	for _, m := range msgs {
		msg := &raftpb.Message{}
		if err := proto.Unmarshal(m.Message, msg); err != nil {
			s.cfg.Logger.Warn("dropping undecodable raft message", "range", m.RangeId, "from", m.FromNode, "err", err)
			continue
		}
		if msg.GetType() == raftpb.MsgSnap {
			continue // snapshots only arrive through HandleSnapshot, with their data
		}
		if err := validate.Header(m.RangeId, msg); err != nil {
			s.dropped(m, err)
			continue
		}
		r := s.replicaForMessage(m.RangeId, msg)
		if r == nil {
			continue
		}
		r.mu.Lock()
		if err := r.log.CheckMessage(msg); err != nil {
			r.mu.Unlock()
			s.dropped(m, err)
			continue
		}
		if r.voteBlackoutLocked(msg) {
			r.mu.Unlock()
			continue
		}
		if !r.destroyed {
			r.peerNodes[msg.GetFrom()] = m.FromNode
			_ = r.rn.Step(msg)
			r.afterStepLocked(msg, m.Quiesce)
		}
		r.mu.Unlock()
		s.markReady(r)
	}
}

// dropped logs (rarely: it means a bug or a hostile peer) a message that failed validation.
func (s *Store) dropped(m *pb.RaftMessage, err error) {
	s.droppedInvalid.Add(1)
	s.cfg.Logger.Warn("dropping invalid raft message", "range", m.RangeId, "from_node", m.FromNode, "err", err)
}

// replicaForMessage finds the addressed replica, creating an uninitialized one for a range this node
// was just added to. Messages to a replica id at or below a tombstone are dropped.
func (s *Store) replicaForMessage(rangeID uint64, msg *raftpb.Message) *Replica {
	to := msg.GetTo()
	s.mu.RLock()
	r := s.replicas[rangeID]
	s.mu.RUnlock()
	if r != nil {
		if r.replicaID == to {
			return r
		}
		if to < r.replicaID {
			return nil // addressed to an older incarnation
		}
		// This node was removed and re-added under a newer replica id: drop the stale replica.
		s.destroyReplica(r, "replaced by a newer replica id")
	}
	if to <= s.tombstoneReplicaID(rangeID) {
		return nil
	}
	// Only messages that can lead to a snapshot or an election may create a replica.
	switch msg.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgVote, raftpb.MsgPreVote, raftpb.MsgTimeoutNow:
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.replicas[rangeID]; r != nil {
		return r
	}
	if to <= s.destroyed[rangeID] { // destroyed, its tombstone maybe not yet written
		return nil
	}
	nr, err := s.newReplica(rangeID, to)
	if err != nil {
		s.cfg.Logger.Error("create replica", "range", rangeID, "err", err)
		return nil
	}
	s.replicas[rangeID] = nr
	return nr
}

// HandleSnapshot implements transport.Handler: it installs a snapshot received in full.
func (s *Store) HandleSnapshot(header *pb.RaftMessage, kvs []*pb.KeyValue) error {
	if !s.takesTraffic() {
		return fmt.Errorf("range %d: node %d is not running (loading or stopped); retry later", header.GetRangeId(), s.cfg.NodeID)
	}
	s.heardFrom([]*pb.RaftMessage{header})
	msg, desc, err := validate.SnapshotHeader(header)
	if err != nil {
		return err
	}
	snap := msg.GetSnapshot()
	// Refuse a snapshot that overlaps another initialized replica: that replica must first learn of the
	// split or removal that made the spans disjoint.
	for _, o := range s.Replicas() {
		if o.rangeID == desc.RangeId || o.IsMeta() != (desc.RangeId == MetaRangeID) {
			continue
		}
		if od := o.Desc(); od != nil && spansOverlap(od, desc) {
			if od.MergingInto != 0 && desc.Generation > od.Generation && coversSpan(desc, od) {
				// This node missed a merge that the snapshot's range (or a later range over the same
				// keys: generations only grow over a key) carries: the frozen replica is superseded
				// (the snapshot rewrites its span).
				s.destroyReplica(o, "merged into the snapshot's range")
				continue
			}
			return fmt.Errorf("range %d: snapshot overlaps local range %d; retry later", desc.RangeId, o.rangeID)
		}
	}
	msg.Type = raftpb.MsgApp.Enum() // placeholder to reuse creation rules
	r := s.replicaForMessage(header.RangeId, msg)
	msg.Type = raftpb.MsgSnap.Enum()
	if r == nil {
		return fmt.Errorf("range %d: no replica %d on node %d for snapshot", header.RangeId, msg.GetTo(), s.cfg.NodeID)
	}
	r.mu.Lock()
	if r.destroyed {
		r.mu.Unlock()
		return fmt.Errorf("range %d: replica destroyed", header.RangeId)
	}
	idx := snap.GetMetadata().GetIndex()
	if r.desc != nil && r.applied >= idx {
		r.mu.Unlock()
		return nil
	}
	r.peerNodes[msg.GetFrom()] = header.FromNode
	r.pendingSnap = &incomingSnapshot{index: idx, desc: desc, kvs: kvs}
	err = r.rn.Step(msg)
	r.mu.Unlock()
	s.markReady(r)
	if err != nil {
		return fmt.Errorf("range %d: step snapshot: %w", header.RangeId, err)
	}
	return nil
}

// coversSpan reports whether a's span contains b's.
func coversSpan(a, b *pb.RangeDescriptor) bool {
	return bytes.Compare(a.StartKey, b.StartKey) <= 0 && (len(a.EndKey) == 0 || (len(b.EndKey) > 0 && bytes.Compare(b.EndKey, a.EndKey) <= 0))
}

func spansOverlap(a, b *pb.RangeDescriptor) bool {
	aBeforeB := len(a.EndKey) > 0 && bytes.Compare(a.EndKey, b.StartKey) <= 0
	bBeforeA := len(b.EndKey) > 0 && bytes.Compare(b.EndKey, a.StartKey) <= 0
	return !aBeforeB && !bBeforeA
}

// ReportUnreachable tells every replica with a peer on nodeID that it is unreachable.
func (s *Store) ReportUnreachable(nodeID uint64) {
	for _, r := range s.Replicas() {
		r.mu.Lock()
		if r.desc != nil && !r.destroyed {
			for _, rd := range r.desc.Replicas {
				if rd.NodeId == nodeID {
					r.rn.ReportUnreachable(rd.ReplicaId)
				}
			}
		}
		r.mu.Unlock()
	}
}

func (s *Store) loop() {
	ticker := time.NewTicker(s.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-s.stopper:
			s.failAll()
			return
		case <-ticker.C:
			s.tickActive()
		case <-s.wake:
			// Let the goroutines that are ready to run (proposers, the transport's receivers) add their
			// work first: one cycle then collects several writes instead of one each
			// (BenchmarkProposeOneNode: 0.16 cycles per write instead of 0.97, a fifth less time per
			// write). Without other runnable goroutines it returns at once.
			runtime.Gosched()
		}
		s.processReady()
	}
}

func (s *Store) failAll() {
	for _, r := range s.Replicas() {
		r.mu.Lock()
		r.failPendingLocked(pb.ErrorCode_AMBIGUOUS, "node stopping")
		r.mu.Unlock()
	}
}

type readyWork struct {
	r     *Replica
	apply []*raftpb.Message // MsgStorageApply: committed entries, durable here and on a quorum
}

// processReady is one cycle of the node's raft loop: step what the log writer handed back, collect
// every replica's Ready (appends into the open log batch, messages that need no durability sent),
// hand the batch on (pipeline.go), then apply the committed entries the Readies carried.
func (s *Store) processReady() {
	s.stepLocal()
	s.dirtyMu.Lock()
	dirty := s.dirty
	s.dirty = s.spareDirty
	s.dirtyMu.Unlock()
	work := s.work[:0]
	defer func() {
		clear(dirty)
		s.spareDirty = dirty
		clear(work)
		s.work = work[:0]
	}()

	snapshot := false
	s.log.BeginCollect()
	for _, r := range dirty {
		w, ok, snap, err := s.collectReady(r)
		if err != nil {
			// The open batch may hold part of r's Ready: it must never be committed.
			s.fatal(err)
			s.log.AbortCollect()
			return
		}
		if ok {
			work = append(work, w)
			snapshot = snapshot || snap
		}
	}
	if !s.log.EndCollect() {
		return
	}
	if len(work) == 0 {
		return
	}
	s.cycles.Add(1)
	if snapshot && !s.flushLog() {
		// A snapshot rewrites a range's data and applied state: nothing else of the range goes on
		// before it is durable.
		return
	}
	var removed []uint64
	for _, w := range work {
		gone, err := s.applyReady(w)
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			s.fatal(err)
			return
		}
		if gone {
			removed = append(removed, w.r.rangeID)
		}
	}
	for _, id := range removed {
		if r := s.Replica(id); r != nil {
			s.destroyReplica(r, "removed from the range")
			if s.cfg.OnReplicaRemoved != nil {
				s.cfg.OnReplicaRemoved(id)
			}
		}
	}
	s.dirtyMu.Lock()
	more := len(s.dirty) > 0
	s.dirtyMu.Unlock()
	if more {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// collectReady takes r's Ready, if it has one: its appends go into the open log batch with the
// responses that wait for them, the messages that need no durability leave now (a leader's appends
// to its followers among them: their fsyncs overlap its own), and the committed entries to apply are
// returned. An error is fatal to the node.
func (s *Store) collectReady(r *Replica) (w readyWork, ok, snapshot bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.destroyed {
		return w, false, false, nil
	}
	if r.readQueue != nil && (r.state == raft.StateLeader || r.leader != 0 && r.state == raft.StateFollower) {
		// A follower's (or learner's) ReadIndex goes to the leader, whose answer is a ReadState here.
		// Once applied that far (releaseReadsLocked) its readers are released; no lease is extended.
		b := r.readQueue
		r.readQueue = nil
		r.readsSent[string(b.ctx)] = b
		b.sent = time.Now()
		if r.state == raft.StateLeader {
			b.leaderTerm = r.rn.BasicStatus().GetTerm()
		}
		r.rn.ReadIndex(b.ctx)
	}
	if !r.rn.HasReady() {
		return w, false, false, nil
	}
	rd := r.rn.Ready()
	if rd.SoftState != nil {
		r.setSoftStateLocked(rd.SoftState)
	}
	w.r = r
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			snap, err := s.persistAppendLocked(r, m)
			if err != nil {
				return w, false, false, fmt.Errorf("range %d: persist raft state: %w", r.rangeID, err)
			}
			snapshot = snapshot || snap
		case raft.LocalApplyThread:
			w.apply = append(w.apply, m)
		case r.replicaID:
			s.stepsMu.Lock()
			s.steps = append(s.steps, localStep{r: r, m: m})
			s.stepsMu.Unlock()
			s.markReady(r)
		default:
			s.sendMessageLocked(r, m)
		}
	}
	for _, rs := range rd.ReadStates {
		if b, ok := r.readsSent[string(rs.RequestCtx)]; ok {
			delete(r.readsSent, string(rs.RequestCtx))
			b.index = rs.Index
			r.readsWait = append(r.readsWait, b)
		}
	}
	return w, true, snapshot, nil
}

// applyReady applies the committed entries of one Ready (durable here and on a quorum: raft hands
// them over only then), answers their proposals and the reads they release, and starts the
// replicas of splits. gone reports that the replica is no longer in its range. An error is fatal
// to the node.
func (s *Store) applyReady(w readyWork) (gone bool, err error) {
	r := w.r
	r.mu.Lock()
	if r.destroyed {
		// Merged away earlier in this cycle: its raft state is gone, nothing more to apply.
		r.mu.Unlock()
		return false, nil
	}
	var splits []*pb.RangeDescriptor
	var merged []uint64
	for _, m := range w.apply {
		sp, mg, g, err := r.applyCommittedLocked(m.GetEntries())
		if err != nil {
			r.mu.Unlock()
			return false, fmt.Errorf("range %d: apply: %w", r.rangeID, err)
		}
		splits, merged, gone = append(splits, sp...), append(merged, mg...), gone || g
		s.entriesApplied.Add(uint64(len(m.GetEntries())))
		for _, resp := range m.GetResponses() {
			_ = r.rn.Step(resp)
		}
	}
	r.releaseReadsLocked()
	if r.rn.HasReady() || r.readQueue != nil {
		s.dirtyMu.Lock()
		s.dirty[r.rangeID] = r
		s.dirtyMu.Unlock()
	}
	wasLeader := r.state == raft.StateLeader
	r.mu.Unlock()
	for _, right := range splits {
		nr := s.createSplitReplica(right)
		if nr != nil && wasLeader {
			// The left side's leader campaigns at once for the right side, so the new range has a
			// leader (on the same node, with the same cache) without waiting for an election timeout.
			nr.Campaign()
		}
	}
	for _, id := range merged {
		s.retireMerged(id)
	}
	return gone, nil
}

func (r *Replica) setSoftStateLocked(ss *raft.SoftState) {
	wasLeader := r.state == raft.StateLeader
	if r.leader != ss.Lead {
		r.store.leaderChanges.Add(1)
	}
	r.leader = ss.Lead
	r.state = ss.RaftState
	if r.state != raft.StateLeader {
		r.dropLeaseLocked(time.Time{})
	}
	if wasLeader && r.state != raft.StateLeader {
		// Proposals made as leader may still commit under the new leader: they wait to see.
		r.orphanPendingLocked()
	}
	if r.state != raft.StateLeader {
		r.failReadsLocked()
	}
}

func (r *Replica) installSnapshotLocked(b *storage.Batch, snap *raftpb.Snapshot) error {
	ps := r.pendingSnap
	r.pendingSnap = nil
	meta := snap.GetMetadata()
	if ps == nil || ps.index != meta.GetIndex() {
		return fmt.Errorf("snapshot at %d has no received data", meta.GetIndex())
	}
	meta2 := r.IsMeta()
	if r.desc != nil {
		lo, hi := storage.DataSpan(meta2, r.desc.StartKey, r.desc.EndKey)
		if err := b.DeleteRange(lo, hi); err != nil {
			return err
		}
	}
	lo, hi := storage.DataSpan(meta2, ps.desc.StartKey, ps.desc.EndKey)
	if r.desc != nil || meta2 || !r.ingestSnapshotLocked(lo, hi, ps.desc, ps.kvs) {
		if err := b.DeleteRange(lo, hi); err != nil {
			return err
		}
		for _, kv := range ps.kvs {
			if err := b.Set(r.dataKey(kv.Key), kv.Value); err != nil {
				return err
			}
		}
	}
	if err := r.log.ResetTo(b, meta.GetIndex(), meta.GetTerm()); err != nil {
		return err
	}
	// The snapshot may or may not hold an orphaned proposal's entry (a leader installs none, so every
	// proposal here is one): its fate is unknown.
	for id, p := range r.proposals {
		r.finishProposalLocked(id, p, pb.ErrorCode_AMBIGUOUS, "a snapshot replaced the log before the write's fate was known")
	}
	r.appliedTerm = meta.GetTerm()
	r.store.snapshotsApplied.Add(1)
	r.desc = ps.desc
	r.log.SetConfState(proto.Clone(meta.GetConfState()).(*raftpb.ConfState))
	r.applied = meta.GetIndex()
	if err := r.writeDescLocked(b); err != nil {
		return err
	}
	r.store.resetChanges(r, r.desc, r.applied, r.applied)
	return b.Set(storage.AppliedStateKey(r.rangeID), u64(r.applied))
}

// ingestSnapshotLocked writes a snapshot that initializes the replica as an sstable and ingests it
// (storage.IngestSpan), and reports whether it did; the caller writes it through its batch
// otherwise. Ingested, the range's data goes straight to the engine's bottom level instead of
// through the WAL, the memtable and compactions that would mix it with every other range's writes
// and rewrite the tables other ranges' cached blocks come from: a node joining the cluster serves
// the ranges it already leads from a cache that the ranges still arriving do not keep flushing.
//
// Only for an uninitialized replica (no data of its own): the ingest is durable before the batch
// that records the snapshot's index, so a crash between the two leaves data under a replica that is
// still uninitialized. Such a replica serves nothing, and the snapshot that initializes it later
// clears its span again (the table carries a range deletion; a batch deletes the span too); no other
// replica on the node can cover that span before then, as HandleSnapshot refuses overlaps.
func (r *Replica) ingestSnapshotLocked(lo, hi []byte, desc *pb.RangeDescriptor, kvs []*pb.KeyValue) bool {
	min := r.store.cfg.SnapshotIngestMinBytes
	if min < 0 {
		return false
	}
	var size int64
	for i, kv := range kvs {
		size += int64(len(kv.Key) + len(kv.Value))
		if i > 0 && bytes.Compare(kvs[i-1].Key, kv.Key) >= 0 {
			return false // an sstable needs ascending keys; a batch does not
		}
		if bytes.Compare(kv.Key, desc.StartKey) < 0 || (len(desc.EndKey) > 0 && bytes.Compare(kv.Key, desc.EndKey) >= 0) {
			return false // not the range's: the batch path writes what it always wrote
		}
	}
	if size < min {
		return false
	}
	i := 0
	next := func() ([]byte, []byte, bool) {
		if i == len(kvs) {
			return nil, nil, false
		}
		kv := kvs[i]
		i++
		return r.dataKey(kv.Key), kv.Value, true
	}
	if err := r.store.eng.IngestSpan(context.Background(), lo, hi, next); err != nil {
		// The ingest is atomic: nothing of it is there; the batch writes the snapshot instead.
		r.store.cfg.Logger.Warn("snapshot ingest failed; writing it through a batch", "range", r.rangeID, "err", err)
		return false
	}
	return true
}

// sendMessageLocked sends one message of r that needs no durability (or a snapshot).
func (s *Store) sendMessageLocked(r *Replica, m *raftpb.Message) {
	to := r.nodeOfLocked(m.GetTo())
	if to == 0 {
		return
	}
	if m.GetType() == raftpb.MsgSnap {
		s.startSnapshotLocked(r, m, to)
		return
	}
	data, err := proto.Marshal(m)
	if err != nil {
		return
	}
	if !s.cfg.Transport.Send(&pb.RaftMessage{RangeId: r.rangeID, FromNode: s.cfg.NodeID, ToNode: to, Message: data}) {
		r.rn.ReportUnreachable(m.GetTo())
	}
}

// startSnapshotLocked streams the range's data at the current applied index to a follower. The raft
// snapshot metadata is rewritten to that index so data and metadata always agree.
func (s *Store) startSnapshotLocked(r *Replica, m *raftpb.Message, toNode uint64) {
	select {
	case s.snapSem <- struct{}{}:
	default:
		r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	meta, err := r.snapshotMetaLocked()
	if err != nil {
		<-s.snapSem
		r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	m.Snapshot = meta
	data, err := proto.Marshal(m)
	if err != nil {
		<-s.snapSem
		r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	engSnap := s.eng.NewSnapshot()
	desc := proto.Clone(r.desc).(*pb.RangeDescriptor)
	header := &pb.RaftMessage{RangeId: r.rangeID, FromNode: s.cfg.NodeID, ToNode: toNode, Message: data}
	to := m.GetTo()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.snapSem }()
		defer engSnap.Close()
		start := time.Now()
		lo, hi := storage.DataSpan(r.IsMeta(), desc.StartKey, desc.EndKey)
		src, err := snapstream.New(engSnap, lo, hi)
		status := raft.SnapshotFinish
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			go func() {
				select {
				case <-s.stopper:
					cancel()
				case <-ctx.Done():
				}
			}()
			err = s.cfg.Transport.SendSnapshot(ctx, header, src) // closes src
			cancel()
		}
		// Info, not Debug: a replica move waits on these, and a slow or refused snapshot is what an
		// operator needs to see when a move times out.
		if err != nil {
			status = raft.SnapshotFailure
			s.cfg.Logger.Info("snapshot failed", "range", r.rangeID, "to", toNode, "index", meta.GetMetadata().GetIndex(),
				"took", time.Since(start).Round(time.Millisecond), "err", err)
		} else {
			s.cfg.Logger.Info("snapshot sent", "range", r.rangeID, "to", toNode, "index", meta.GetMetadata().GetIndex(),
				"took", time.Since(start).Round(time.Millisecond))
		}
		r.mu.Lock()
		if !r.destroyed {
			r.rn.ReportSnapshot(to, status)
		}
		r.mu.Unlock()
		s.markReady(r)
	}()
}

// createSplitReplica starts the right-hand replica of a split that was just applied.
func (s *Store) createSplitReplica(right *pb.RangeDescriptor) *Replica {
	var replicaID uint64
	for _, rd := range right.Replicas {
		if rd.NodeId == s.cfg.NodeID {
			replicaID = rd.ReplicaId
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.replicas[right.RangeId]; old != nil {
		old.mu.Lock()
		old.destroyed = true
		old.failPendingLocked(pb.ErrorCode_UNAVAILABLE, "replica re-created by split")
		old.mu.Unlock()
	}
	nr, err := s.newReplica(right.RangeId, replicaID)
	if err != nil {
		s.fatal(fmt.Errorf("range %d: create after split: %w", right.RangeId, err))
		return nil
	}
	s.replicas[right.RangeId] = nr
	s.resetChanges(nr, right, nr.applied, 0)
	s.dirtyMu.Lock()
	s.dirty[nr.rangeID] = nr
	s.dirtyMu.Unlock()
	return nr
}

// destroyReplica removes a replica and its data from this node, leaving a tombstone.
func (s *Store) destroyReplica(r *Replica, why string) {
	r.mu.Lock()
	if r.destroyed {
		r.mu.Unlock()
		return
	}
	r.destroyed = true
	r.failPendingLocked(pb.ErrorCode_RANGE_MOVED, why)
	desc := r.desc
	r.mu.Unlock()
	s.removedChanges(r, desc)
	s.mu.Lock()
	if s.destroyed == nil {
		s.destroyed = map[uint64]uint64{}
	}
	s.destroyed[r.rangeID] = max(s.destroyed[r.rangeID], r.replicaID)
	s.mu.Unlock()
	s.forget(r)
	// Appends of r still in the log pipeline must not land after the deletion below.
	if !s.flushLog() {
		return
	}
	b := s.eng.NewBatch()
	defer b.Close()
	lo, hi := storage.RaftStateSpan(r.rangeID)
	_ = b.DeleteRange(lo, hi)
	// A frozen range's data belongs to the merge that froze it: the left range (once it applies the
	// merge here, or through a snapshot that rewrites the span) owns it.
	if desc != nil && desc.MergingInto == 0 {
		// Only clear data no other local replica owns now.
		owned := false
		for _, o := range s.Replicas() {
			if od := o.Desc(); od != nil && o.IsMeta() == r.IsMeta() && spansOverlap(od, desc) {
				owned = true
			}
		}
		if !owned {
			dlo, dhi := storage.DataSpan(r.IsMeta(), desc.StartKey, desc.EndKey)
			_ = b.DeleteRange(dlo, dhi)
		}
	}
	_ = b.Set(storage.ReplicaTombstoneKey(r.rangeID), u64(r.replicaID))
	if err := b.Commit(true); err != nil {
		s.cfg.Logger.Error("destroy replica", "range", r.rangeID, "err", err)
	}
	s.cfg.Logger.Info("replica destroyed", "range", r.rangeID, "node", s.cfg.NodeID, "why", why)
}

// fatal stops the node's raft processing: continuing after a failed durable write could acknowledge
// something that is not on disk. The process must be restarted (after the fault is fixed).
func (s *Store) fatal(err error) {
	s.cfg.Logger.Error("FATAL: storage failure, this node stops serving writes; restart it after fixing the cause", "err", err)
	s.stopped.Do(func() { close(s.stopper) })
}

// Stopped is closed when the store stops (by Stop or a fatal storage error).
func (s *Store) Stopped() <-chan struct{} { return s.stopper }

// RemoveReplica destroys the local replica of rangeID (garbage collection of a replica that the
// range no longer contains).
func (s *Store) RemoveReplica(rangeID uint64, why string) {
	if r := s.Replica(rangeID); r != nil {
		s.destroyReplica(r, why)
	}
}

// LoopStats are counters of the node's raft loop.
type LoopStats struct {
	Cycles, Syncs, EntriesWritten, EntriesApplied uint64
	Proposals, LeaderChanges, SnapshotsApplied    uint64
	// LeaseReads were served under the leader lease; ReadIndexReads waited for a ReadIndex round.
	LeaseReads, ReadIndexReads uint64
	// ReplicaReads waited for a read index from the leader at a replica that does not lead;
	// BoundedLocalReads were served at once, within their staleness bound.
	ReplicaReads, BoundedLocalReads uint64
	// DroppedInvalid counts raft messages that failed validation (validate.go). No correct peer
	// sends one: any count is a bug or a hostile peer, and the integration tests require zero.
	DroppedInvalid uint64
}

// ProposalAdmission reads the proposal gate (Config.ProposalLimits).
func (s *Store) ProposalAdmission() admission.Stats { return s.proposalGate.Stats() }

// LoopStats reads the raft loop's counters.
func (s *Store) LoopStats() LoopStats {
	return LoopStats{Cycles: s.cycles.Load(), Syncs: s.log.Syncs(), EntriesWritten: s.entriesWritten.Load(), EntriesApplied: s.entriesApplied.Load(),
		Proposals: s.proposals.Load(), LeaderChanges: s.leaderChanges.Load(), SnapshotsApplied: s.snapshotsApplied.Load(),
		LeaseReads: s.leaseReads.Load(), ReadIndexReads: s.readIndexReads.Load(), DroppedInvalid: s.droppedInvalid.Load(),
		ReplicaReads: s.replicaReads.Load(), BoundedLocalReads: s.boundedLocalReads.Load()}
}
