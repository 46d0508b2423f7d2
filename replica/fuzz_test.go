package replica

import (
	"bytes"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica/internal/raftlog"
	"github.com/shoaldb/shoal/storage"
)

// Fuzz targets for what a node decodes from its peers: raft messages (transport → Store.HandleRaftMessages)
// and snapshot headers (transport → Store.HandleSnapshot), plus the meta range's key encodings.
//
// Each input gets a fresh single-node store (engine in memory) that is driven synchronously: the raft
// loop goroutine is not started, the fuzz function runs processReady itself, so whatever an input
// triggers — persisting, applying, installing a snapshot — happens, and fails, within that input.

// fuzzUserEnd is where the first user range ends: [fuzzUserEnd, +inf) is free for a snapshot of a new
// range to land in.
const fuzzUserEnd = "m"

// newFuzzStore returns a store of node 1 holding the meta range (replica 1, never elected: a follower
// at the bootstrap term) and user range 2 = ["", "m") (replica 1, elected leader), with key "a" = "1".
func newFuzzStore(tb testing.TB) *Store {
	tb.Helper()
	eng, err := storage.Open(tb.TempDir(), storage.Options{CreateIfMissing: true, FS: vfs.NewMem(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	cfg := Config{NodeID: 1, Engine: eng, Transport: &fakeTransport{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	boot := NewStore(cfg)
	meta := &pb.RangeDescriptor{RangeId: MetaRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	if err := boot.Bootstrap(meta, []*pb.KeyValue{{Key: MetaDescKey([]byte(fuzzUserEnd)), Value: mustMarshalDesc(userDesc(FirstUserRangeID, "", fuzzUserEnd))}}); err != nil {
		tb.Fatal(err)
	}
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", fuzzUserEnd), []*pb.KeyValue{{Key: []byte("a"), Value: []byte("1")}}); err != nil {
		tb.Fatal(err)
	}
	s := NewStore(cfg)
	if err := s.Load(); err != nil {
		tb.Fatal(err)
	}
	r := s.Replica(FirstUserRangeID)
	r.Campaign()
	drainReady(s)
	if !r.IsLeader() {
		tb.Fatalf("range %d did not elect its only voter: %+v", FirstUserRangeID, r.Status())
	}
	return s
}

func mustMarshalDesc(d *pb.RangeDescriptor) []byte {
	b, err := proto.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// drainReady runs the store's ready cycles until no replica has work left (bounded: a cycle can make
// more work, e.g. a leader appending after a conf change).
func drainReady(s *Store) {
	for i := 0; i < 32; i++ {
		s.dirtyMu.Lock()
		n := len(s.dirty)
		s.dirtyMu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-s.stopper:
			return
		default:
		}
		s.processReady()
	}
}

func marshalRaft(m *raftpb.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func raftMsg(t raftpb.MessageType, from, to, term uint64) *raftpb.Message {
	return &raftpb.Message{Type: t.Enum(), From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(term)}
}

// FuzzRaftMessage hands one arbitrary raftpb.Message (as received in a pb.RaftMessage from a peer) to
// the store of a single node, then lets the store process whatever it caused. It must not panic.
func FuzzRaftMessage(f *testing.F) {
	hb := raftMsg(raftpb.MsgHeartbeat, 2, 1, raftlog.InitialTerm+1)
	app := raftMsg(raftpb.MsgApp, 2, 2, raftlog.InitialTerm+1)
	app.LogTerm, app.Index = proto.Uint64(raftlog.InitialTerm), proto.Uint64(raftlog.InitialIndex)
	vote := raftMsg(raftpb.MsgPreVote, 2, 1, raftlog.InitialTerm+3)
	vote.LogTerm, vote.Index = proto.Uint64(raftlog.InitialTerm+1), proto.Uint64(raftlog.InitialIndex+1)
	appResp := raftMsg(raftpb.MsgAppResp, 2, 1, raftlog.InitialTerm+1)
	appResp.Index = proto.Uint64(raftlog.InitialIndex + 1)
	readIndex := raftMsg(raftpb.MsgReadIndex, 2, 1, 0)
	readIndex.Entries = []*raftpb.Entry{{Data: []byte("ctx")}}
	seeds := []struct {
		rangeID, from uint64
		quiesce       bool
		msg           []byte
	}{
		{MetaRangeID, 2, false, marshalRaft(hb)},             // a leader elsewhere for the meta range
		{MetaRangeID, 2, true, marshalRaft(hb)},              // … telling this follower to quiesce
		{3, 9, false, marshalRaft(app)},                      // creates an uninitialized replica of range 3
		{FirstUserRangeID, 2, false, marshalRaft(vote)},      // a pre-vote at a later term to the leader
		{FirstUserRangeID, 2, false, marshalRaft(appResp)},   // a response from a replica the leader does not know
		{FirstUserRangeID, 2, false, marshalRaft(readIndex)}, // a follower asking the leader for a read index
		{FirstUserRangeID, 2, false, marshalRaft(raftMsg(raftpb.MsgTimeoutNow, 2, 1, raftlog.InitialTerm+1))},
		{FirstUserRangeID, 2, false, marshalRaft(raftMsg(raftpb.MsgSnap, 2, 1, raftlog.InitialTerm+1))}, // only via HandleSnapshot
		{FirstUserRangeID, 2, false, marshalRaft(raftMsg(raftpb.MsgHeartbeatResp, 2, 1, raftlog.InitialTerm+1))},
		{FirstUserRangeID, 2, false, []byte("\xff\xff not a raft message")},
		{FirstUserRangeID, 2, false, nil},
	}
	for _, s := range seeds {
		f.Add(s.rangeID, s.from, s.quiesce, s.msg)
	}
	f.Fuzz(func(t *testing.T, rangeID, fromNode uint64, quiesce bool, msg []byte) {
		s := newFuzzStore(t)
		s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: rangeID, FromNode: fromNode, ToNode: 1, Message: msg, Quiesce: quiesce}})
		drainReady(s)
	})
}

// FuzzSnapshotHeader hands an arbitrary snapshot header (the raftpb MsgSnap of the first chunk) with
// one key-value pair to the store's HandleSnapshot, then lets the store install what it accepted. It
// must not panic; an error is a fine answer.
func FuzzSnapshotHeader(f *testing.F) {
	// A well-formed snapshot of a new range 3 = ["m", +inf) led by node 9; this node is its replica 2.
	newRange := &pb.RangeDescriptor{RangeId: 3, StartKey: []byte(fuzzUserEnd), Generation: 2, NextReplicaId: 3,
		Replicas: []*pb.ReplicaDescriptor{{NodeId: 9, ReplicaId: 1}, {NodeId: 1, ReplicaId: 2}}}
	snap := func(to, term, index uint64, desc *pb.RangeDescriptor, voters ...uint64) []byte {
		m := raftMsg(raftpb.MsgSnap, 1, to, term)
		m.Snapshot = &raftpb.Snapshot{Data: mustMarshalDesc(desc), Metadata: &raftpb.SnapshotMetadata{
			Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: &raftpb.ConfState{Voters: voters}}}
		return marshalRaft(m)
	}
	f.Add(uint64(3), uint64(9), snap(2, 7, 20, newRange, 1, 2), []byte("n"), []byte("v"))
	f.Add(uint64(3), uint64(9), snap(2, 7, 20, newRange, 1), []byte("n"), []byte("v"))          // this replica is not in the conf state
	f.Add(uint64(3), uint64(9), snap(0, 7, 20, newRange, 1, 2), []byte("n"), []byte("v"))       // to replica 0
	f.Add(uint64(4), uint64(9), snap(2, 7, 20, newRange, 1, 2), []byte("n"), []byte("v"))       // header and descriptor disagree
	f.Add(uint64(3), uint64(9), snap(2, 7, 0, newRange, 1, 2), []byte("n"), []byte("v"))        // at index 0
	f.Add(uint64(3), uint64(9), snap(2, 7, 20, newRange, 1, 2), []byte("a"), []byte("outside")) // a pair outside the range
	overlap := proto.Clone(newRange).(*pb.RangeDescriptor)
	overlap.StartKey = []byte("c")
	f.Add(uint64(3), uint64(9), snap(2, 7, 20, overlap, 1, 2), []byte("n"), []byte("v")) // overlaps range 2
	self := userDesc(FirstUserRangeID, "", fuzzUserEnd)
	self.Generation = 2
	f.Add(uint64(FirstUserRangeID), uint64(9), snap(1, raftlog.InitialTerm+2, 50, self, 1, 2), []byte("b"), []byte("v")) // to the leader, at a later term
	f.Add(uint64(3), uint64(9), []byte("\x12\x03abc"), []byte(nil), []byte(nil))

	f.Fuzz(func(t *testing.T, rangeID, fromNode uint64, header, key, value []byte) {
		s := newFuzzStore(t)
		_ = s.HandleSnapshot(&pb.RaftMessage{RangeId: rangeID, FromNode: fromNode, ToNode: 1, Message: header},
			[]*pb.KeyValue{{Key: key, Value: value}})
		drainReady(s)
	})
}

// fuzzRanges are the ranges a structured input addresses: the meta range (a follower here), the user
// range (the leader here), a range this node does not have yet, and the invalid range 0.
var fuzzRanges = [...]uint64{MetaRangeID, FirstUserRangeID, 3, 0}

// FuzzRaftMessageFields is FuzzRaftMessage with the message built from its fields, so that inputs
// reach raft's state machine (terms, indexes and commit points near the store's) instead of stopping
// at a decoding error. It must not panic.
func FuzzRaftMessageFields(f *testing.F) {
	type seed struct {
		rng, typ                          uint8
		from, to, term, logTerm, idx, cmt uint64
		entType                           uint8
		entIndex, entTerm                 uint64
		entData                           []byte
		reject, quiesce                   bool
	}
	seeds := []seed{
		{0, uint8(raftpb.MsgHeartbeat), 2, 1, raftlog.InitialTerm + 1, 0, 0, raftlog.InitialIndex, 0, 0, 0, nil, false, true},
		{0, uint8(raftpb.MsgApp), 2, 1, raftlog.InitialTerm + 1, raftlog.InitialTerm, raftlog.InitialIndex, raftlog.InitialIndex + 1, 0, raftlog.InitialIndex + 1, raftlog.InitialTerm + 1, nil, false, false},
		{1, uint8(raftpb.MsgVote), 2, 1, raftlog.InitialTerm + 2, raftlog.InitialTerm + 1, raftlog.InitialIndex + 1, 0, 0, 0, 0, nil, false, false},
		{1, uint8(raftpb.MsgAppResp), 2, 1, raftlog.InitialTerm + 1, 0, raftlog.InitialIndex + 1, 0, 0, 0, 0, nil, true, false},
		{1, uint8(raftpb.MsgReadIndex), 2, 1, 0, 0, 0, 0, 0, 0, 0, []byte("ctx"), false, false},
		{2, uint8(raftpb.MsgApp), 9, 2, 7, 0, 0, 0, 0, 0, 0, nil, false, false},
		{2, uint8(raftpb.MsgPreVote), 9, 2, 7, 7, 20, 0, 0, 0, 0, nil, false, false},
		{3, uint8(raftpb.MsgHeartbeat), 2, 1, 1, 0, 0, 0, 0, 0, 0, nil, false, false},
	}
	for _, s := range seeds {
		f.Add(s.rng, s.typ, s.from, s.to, s.term, s.logTerm, s.idx, s.cmt, s.entType, s.entIndex, s.entTerm, s.entData, s.reject, s.quiesce)
	}
	f.Fuzz(func(t *testing.T, rng, typ uint8, from, to, term, logTerm, index, commit uint64,
		entType uint8, entIndex, entTerm uint64, entData []byte, reject, quiesce bool) {
		m := &raftpb.Message{Type: raftpb.MessageType(int32(typ) % int32(len(raftpb.MessageType_name))).Enum(),
			From: proto.Uint64(from), To: proto.Uint64(to), Term: proto.Uint64(term), LogTerm: proto.Uint64(logTerm),
			Index: proto.Uint64(index), Commit: proto.Uint64(commit), Reject: proto.Bool(reject)}
		if entIndex != 0 || entTerm != 0 || len(entData) > 0 {
			m.Entries = []*raftpb.Entry{{Type: raftpb.EntryType(entType % 3).Enum(), Index: proto.Uint64(entIndex), Term: proto.Uint64(entTerm), Data: entData}}
		}
		s := newFuzzStore(t)
		s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: fuzzRanges[int(rng)%len(fuzzRanges)], FromNode: 2, ToNode: 1, Message: marshalRaft(m), Quiesce: quiesce}})
		drainReady(s)
	})
}

// ids turns each byte into a replica id (a compact way for the fuzzer to write id lists).
func ids(b []byte) []uint64 {
	var out []uint64
	for _, c := range b {
		out = append(out, uint64(c))
	}
	return out
}

// FuzzSnapshotFields is FuzzSnapshotHeader with the MsgSnap built from its fields: the snapshot's
// index, term and conf state, its range descriptor and the replica it is addressed to. It must not
// panic.
func FuzzSnapshotFields(f *testing.F) {
	f.Add(uint8(2), uint64(2), uint64(7), uint64(20), []byte(fuzzUserEnd), []byte(nil), uint64(2), []byte{1, 2}, []byte(nil), []byte(nil), []byte(nil), false, []byte("n"), []byte("v"))
	f.Add(uint8(2), uint64(2), uint64(7), uint64(20), []byte(fuzzUserEnd), []byte(nil), uint64(2), []byte{1}, []byte{2}, []byte(nil), []byte(nil), false, []byte("n"), []byte("v"))
	f.Add(uint8(2), uint64(3), uint64(7), uint64(20), []byte("x"), []byte("y"), uint64(3), []byte{3}, []byte(nil), []byte{1, 3}, []byte(nil), true, []byte("x"), []byte("v"))
	f.Add(uint8(1), uint64(1), uint64(raftlog.InitialTerm+2), uint64(50), []byte(nil), []byte(fuzzUserEnd), uint64(1), []byte{1, 2}, []byte(nil), []byte(nil), []byte(nil), false, []byte("b"), []byte("v"))
	f.Add(uint8(0), uint64(1), uint64(raftlog.InitialTerm+2), uint64(50), []byte(nil), []byte(nil), uint64(1), []byte{1, 2}, []byte(nil), []byte(nil), []byte(nil), false, []byte("d"), []byte("v"))
	f.Fuzz(func(t *testing.T, rng uint8, to, term, index uint64, start, end []byte, replicaID uint64,
		voters, learners, votersOut, learnersNext []byte, autoLeave bool, key, value []byte) {
		rangeID := fuzzRanges[int(rng)%len(fuzzRanges)]
		desc := &pb.RangeDescriptor{RangeId: rangeID, StartKey: start, EndKey: end, Generation: 2, NextReplicaId: 4,
			Replicas: []*pb.ReplicaDescriptor{{NodeId: 9, ReplicaId: 9}, {NodeId: 1, ReplicaId: replicaID}}}
		m := raftMsg(raftpb.MsgSnap, 9, to, term)
		m.Snapshot = &raftpb.Snapshot{Data: mustMarshalDesc(desc), Metadata: &raftpb.SnapshotMetadata{
			Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: &raftpb.ConfState{
				Voters: ids(voters), Learners: ids(learners), VotersOutgoing: ids(votersOut), LearnersNext: ids(learnersNext),
				AutoLeave: proto.Bool(autoLeave)}}}
		s := newFuzzStore(t)
		_ = s.HandleSnapshot(&pb.RaftMessage{RangeId: rangeID, FromNode: 9, ToNode: 1, Message: marshalRaft(m)},
			[]*pb.KeyValue{{Key: key, Value: value}})
		drainReady(s)
	})
}

// FuzzMetaKeys checks the meta range's key layout: the descriptor of the range containing key is the
// first descriptor key at or after append(MetaLookupKey(key), 0) (kv's lookupRange), which holds if
// and only if the descriptor keys order like range ends (an empty end, +inf, after every other).
func FuzzMetaKeys(f *testing.F) {
	f.Add([]byte("a"), []byte("m"), uint64(1), uint64(2))
	f.Add([]byte("m"), []byte("m"), uint64(2), uint64(1))
	f.Add([]byte("m"), []byte("m\x00"), uint64(255), uint64(256))
	f.Add([]byte{}, []byte{}, uint64(0), uint64(1<<63))
	f.Add([]byte{0xff, 0xff}, []byte{0xff}, uint64(1<<56), uint64(1))
	f.Add([]byte{0x01}, []byte{0x00}, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, key, end []byte, nodeA, nodeB uint64) {
		dlo, dhi := MetaDescSpan()
		nlo, nhi := MetaNodeSpan()
		in := func(k, lo, hi []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }

		lookup := append(MetaLookupKey(key), 0)
		desc := MetaDescKey(end)
		if !in(desc, dlo, dhi) || !in(lookup, dlo, dhi) {
			t.Fatalf("MetaDescKey(%x) = %x or lookup key %x outside the descriptor span [%x, %x)", end, desc, lookup, dlo, dhi)
		}
		if in(desc, nlo, nhi) {
			t.Fatalf("MetaDescKey(%x) = %x inside the node span", end, desc)
		}
		// The range ending at end is at or after the lookup key of key iff key < end (+inf for an empty end).
		found := bytes.Compare(desc, lookup) >= 0
		if want := len(end) == 0 || bytes.Compare(key, end) < 0; found != want {
			t.Fatalf("key %x, range end %x: descriptor key %x >= lookup key %x is %v, want %v", key, end, desc, lookup, found, want)
		}
		// Descriptor keys order like range ends; +inf after all.
		other := MetaDescKey(key)
		if c, want := bytes.Compare(desc, other), compareEnds(end, key); c != want {
			t.Fatalf("MetaDescKey(%x) vs MetaDescKey(%x) compares %d, want %d", end, key, c, want)
		}
		// The descriptor key of a range ends where its end key starts (decoding is stripping the tag).
		if len(end) > 0 && !bytes.Equal(desc[2:], end) {
			t.Fatalf("MetaDescKey(%x) = %x does not carry the end key", end, desc)
		}

		// Node keys: fixed width, ordered by id, inside the node span, outside the descriptor span.
		ka, kb := MetaNodeKey(nodeA), MetaNodeKey(nodeB)
		if len(ka) != 9 || !in(ka, nlo, nhi) || in(ka, dlo, dhi) {
			t.Fatalf("MetaNodeKey(%d) = %x: bad width or span", nodeA, ka)
		}
		if c, want := bytes.Compare(ka, kb), cmpU64(nodeA, nodeB); c != want {
			t.Fatalf("MetaNodeKey(%d) vs MetaNodeKey(%d) compares %d, want %d", nodeA, nodeB, c, want)
		}
		// Counter keys never fall in the descriptor or node spans, whatever their name.
		ck := MetaCounterKey(string(key))
		if in(ck, dlo, dhi) || in(ck, nlo, nhi) {
			t.Fatalf("MetaCounterKey(%q) = %x inside the descriptor or node span", key, ck)
		}
	})
}

// compareEnds compares range end keys, the empty end being +inf.
func compareEnds(a, b []byte) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1
	case len(b) == 0:
		return -1
	}
	return bytes.Compare(a, b)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
