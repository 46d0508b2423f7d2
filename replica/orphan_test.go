package replica

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// play delivers msg to s as if node 2 (replica 2) had sent it.
func play(t *testing.T, s *Store, msg *raftpb.Message) {
	t.Helper()
	msg.From, msg.To = proto.Uint64(2), proto.Uint64(1)
	data, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: FirstUserRangeID, FromNode: 2, ToNode: 1, Message: data}})
}

// leadWithPeer makes node 1 lead a range whose other voter, node 2, the test plays: node 2 grants
// every (pre-)vote node 1 asks for. Ticks are an hour apart, so nothing happens that the test does
// not cause.
func leadWithPeer(t *testing.T) (*storeEnv, *Store, *Replica) {
	env := newStoreEnv(t)
	desc := userDesc(FirstUserRangeID, "", "")
	desc.Replicas = append(desc.Replicas, &pb.ReplicaDescriptor{NodeId: 2, ReplicaId: 2})
	desc.NextReplicaId = 3
	if err := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr}).Bootstrap(desc, nil); err != nil {
		t.Fatal(err)
	}
	s := env.startWith(Config{TickInterval: time.Hour})
	r := s.Replica(FirstUserRangeID)
	r.mu.Lock()
	r.noVotesUntil = time.Time{} // a restart's vote blackout lasts ten (hour-long) ticks
	r.mu.Unlock()
	r.Campaign()
	answered := 0
	waitFor(t, "node 1 to lead with node 2's vote", func() bool {
		sent := env.tr.messages()
		for _, m := range sent[answered:] {
			msg := &raftpb.Message{}
			if err := proto.Unmarshal(m.Message, msg); err != nil {
				t.Fatal(err)
			}
			switch msg.GetType() {
			case raftpb.MsgPreVote:
				play(t, s, &raftpb.Message{Type: raftpb.MsgPreVoteResp.Enum(), Term: proto.Uint64(msg.GetTerm())})
			case raftpb.MsgVote:
				play(t, s, &raftpb.Message{Type: raftpb.MsgVoteResp.Enum(), Term: proto.Uint64(msg.GetTerm())})
			}
		}
		answered = len(sent)
		return r.IsLeader()
	})
	return env, s, r
}

// TestOrphanedProposalIsAnswered: a leader loses its leadership with a write proposed but not
// committed. If the new leader commits the entry, the write succeeds (a planned transfer hands the
// target every entry the old leader accepted); if it overwrites it, the write fails NOT_LEADER, not
// applied, which the client may retry. Before, both were AMBIGUOUS.
func TestOrphanedProposalIsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		// newLeaderKeeps: node 2, the new leader, has the write's entry and commits it; otherwise its
		// log replaces the entry with one of its own term.
		newLeaderKeeps bool
		want           pb.ErrorCode // -1: success
	}{
		{"committed by the new leader", true, -1},
		{"overwritten by the new leader", false, pb.ErrorCode_NOT_LEADER},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, s, r := leadWithPeer(t)
			var term, last uint64
			waitFor(t, "the leader's first entry of its term in its log", func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				term, last = r.rn.BasicStatus().GetTerm(), r.log.Last()
				lt, err := r.log.Term(last)
				return err == nil && lt == term
			})
			errc := make(chan error, 1)
			go func() {
				_, err := r.Propose(ctxT(t), putCmd("a", "1"))
				errc <- err
			}()
			i := last + 1 // the write's entry: node 2 never acknowledges it, so it stays uncommitted
			waitFor(t, "the write's entry in the leader's log", func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.log.Last() >= i
			})
			next := &raftpb.Entry{Type: raftpb.EntryNormal.Enum(), Term: proto.Uint64(term + 1)}
			app := &raftpb.Message{Type: raftpb.MsgApp.Enum(), Term: proto.Uint64(term + 1), LogTerm: proto.Uint64(term)}
			if tc.newLeaderKeeps {
				next.Index = proto.Uint64(i + 1)
				app.Index, app.Commit = proto.Uint64(i), proto.Uint64(i+1)
			} else {
				next.Index = proto.Uint64(i)
				app.Index, app.Commit = proto.Uint64(i-1), proto.Uint64(i)
			}
			app.Entries = []*raftpb.Entry{next}
			play(t, s, app)
			select {
			case err := <-errc:
				if got := errCode(err); got != tc.want {
					t.Fatalf("the write across the leadership change: %v (code %v), want code %v", err, got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the write across the leadership change was not answered")
			}
			if r.IsLeader() {
				t.Fatal("node 1 still leads after node 2's append of a later term")
			}
			_, found, err := env.eng.Get(r.dataKey([]byte("a")))
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.newLeaderKeeps {
				t.Errorf("the write applied: %v, want %v", found, tc.newLeaderKeeps)
			}
		})
	}
}

// TestProposalIDsDiffer: replicas resolve the pending proposal an applied entry names, so two
// replicas (or two lives of one) must not number their proposals alike.
func TestProposalIDsDiffer(t *testing.T) {
	seen := map[uint64]bool{}
	for range 1000 {
		id := newProposalIDs()
		if id == 0 || id >= 1<<62 || seen[id] {
			t.Fatalf("proposal ids start at %d (seen: %v); want distinct values in [1, 2^62)", id, seen[id])
		}
		seen[id] = true
	}
}
