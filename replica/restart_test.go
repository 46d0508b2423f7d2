package replica

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/raftlog"
	"github.com/shoaldb/shoal/storage"
)

// TestRaftTrafficBeforeLoad: a node hands its store to the transport before the store has loaded
// its replicas (node.Start; a supervised restart's peers reconnect at that moment), so a leader's
// append can arrive first. A replica built then from that message and another built by Load would
// both be live for one range: the first acknowledged entries the second, the one that serves the
// range, never had, and the leader's heartbeats committing them were dropped ("heartbeat commits N+1
// beyond last index N") until its leadership moved. Whatever the store acknowledges, the replica
// serving the range must hold, in memory and on disk.
func TestRaftTrafficBeforeLoad(t *testing.T) {
	eng := followerEngine(t)
	tr := &fakeTransport{}
	// No Start: each processReady is one deterministic loop cycle that commits its own batch.
	s := NewStore(Config{NodeID: 2, Engine: eng, Transport: tr, TickInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	next := uint64(raftlog.InitialIndex + 1)
	app := leaderMessage(&raftpb.Message{Type: raftpb.MsgApp.Enum(), LogTerm: proto.Uint64(raftlog.InitialTerm),
		Index: proto.Uint64(raftlog.InitialIndex), Commit: proto.Uint64(raftlog.InitialIndex),
		Entries: []*raftpb.Entry{{Term: proto.Uint64(raftlog.InitialTerm + 1), Index: proto.Uint64(next)}}})
	s.HandleRaftMessages([]*pb.RaftMessage{app})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.processReady()
	if ackedBy(t, tr) < next {
		// Not taken before Load: the leader resends what it has no answer for, as raft does.
		s.HandleRaftMessages([]*pb.RaftMessage{app})
		s.processReady()
	}
	acked := ackedBy(t, tr)
	if acked != next {
		t.Fatalf("the store acknowledged up to %d, want %d", acked, next)
	}
	r := s.Replica(FirstUserRangeID)
	r.mu.Lock()
	last := r.log.Last()
	r.mu.Unlock()
	onDisk, err := raftlog.Load(eng, eng, FirstUserRangeID)
	if err != nil {
		t.Fatal(err)
	}
	if last < acked || onDisk.Last() < acked {
		t.Fatalf("acknowledged entry %d, but the replica serving the range holds up to %d (on disk %d): "+
			"another replica of the range answered for it", acked, last, onDisk.Last())
	}
	hb := leaderMessage(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Commit: proto.Uint64(acked)})
	s.HandleRaftMessages([]*pb.RaftMessage{hb})
	if n := s.LoopStats().DroppedInvalid; n != 0 {
		t.Fatalf("%d messages dropped as invalid: the leader's heartbeat committing the acknowledged entry", n)
	}
}

// followerEngine is an engine holding replica 2 (node 2) of a range of three voters, as created.
func followerEngine(t *testing.T) *storage.Engine {
	t.Helper()
	eng, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	desc := &pb.RangeDescriptor{RangeId: FirstUserRangeID, NextReplicaId: 4, Generation: 1,
		Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}, {NodeId: 2, ReplicaId: 2}, {NodeId: 3, ReplicaId: 3}}}
	if err := NewStore(Config{NodeID: 2, Engine: eng}).Bootstrap(desc, nil); err != nil {
		t.Fatal(err)
	}
	return eng
}

// leaderMessage wraps m as replica 1 (node 1), leader at the term after the initial one, sends it to
// replica 2 on node 2.
func leaderMessage(m *raftpb.Message) *pb.RaftMessage {
	m.From, m.To, m.Term = proto.Uint64(1), proto.Uint64(2), proto.Uint64(raftlog.InitialTerm+1)
	data, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return &pb.RaftMessage{RangeId: FirstUserRangeID, FromNode: 1, ToNode: 2, Message: data}
}

// ackedBy is the highest log index the store acknowledged to node 1 (what its leader counts as the
// follower's match).
func ackedBy(t *testing.T, tr *fakeTransport) uint64 {
	t.Helper()
	var acked uint64
	for _, rm := range tr.messages() {
		m := &raftpb.Message{}
		if err := proto.Unmarshal(rm.Message, m); err != nil {
			t.Fatal(err)
		}
		if rm.ToNode == 1 && m.GetType() == raftpb.MsgAppResp && !m.GetReject() {
			acked = max(acked, m.GetIndex())
		}
	}
	return acked
}

// TestStoppedStoreTakesNoTraffic: a retired node's streams may still deliver a few messages after
// its store stopped (a supervised restart cuts them after the stop begins). No loop answers them
// then, and a heartbeat committing what the node's next incarnation acknowledged was dropped as
// invalid, a false alarm: a stopped store steps and checks nothing.
func TestStoppedStoreTakesNoTraffic(t *testing.T) {
	eng := followerEngine(t)
	s := NewStore(Config{NodeID: 2, Engine: eng, Transport: &fakeTransport{}, TickInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	s.Start()
	s.Stop()
	hb := leaderMessage(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Commit: proto.Uint64(raftlog.InitialIndex + 1)})
	s.HandleRaftMessages([]*pb.RaftMessage{hb})
	if n := s.LoopStats().DroppedInvalid; n != 0 {
		t.Fatalf("a stopped store checked a heartbeat and dropped it as invalid (%d)", n)
	}
	if st := s.Replica(FirstUserRangeID).Status(); st.Term != raftlog.InitialTerm {
		t.Fatalf("a stopped store's replica stepped a message: term %d, want %d", st.Term, raftlog.InitialTerm)
	}
	if err := s.HandleSnapshot(hb, nil); err == nil {
		t.Fatal("a stopped store took a snapshot")
	}
}
