package replica

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/replica/internal/raftlog"
)

// A lagging follower gets appends whose commit index is past the entries they carry (the leader
// sends its own commit index; raft clamps it): they must be accepted, or the follower stalls until a
// snapshot. A heartbeat committing past the follower's log is refused (raft would panic on it). An
// append of a later term that rewrites a committed entry is refused; a deposed leader's delayed
// append or heartbeat, of an earlier term, is left to raft, which ignores it.
func TestCheckAgainstLogCommitIndexes(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := env.start(10 * time.Millisecond)
	r := s.Replica(FirstUserRangeID)
	// The leader's first entry (its term's empty entry) committed: the log has an entry past the
	// initial index for a later term's append to rewrite.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		c := r.log.HardState().GetCommit()
		r.mu.Unlock()
		if c > raftlog.InitialIndex {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bootstrapped range committed nothing in 10 s")
		}
	}
	r.mu.Lock()
	last := r.log.Last()
	term := r.log.HardState().GetTerm()
	r.mu.Unlock()
	// What a deposed leader of an earlier term had at the committed indexes: different terms.
	stale := &raftpb.Message{Type: raftpb.MsgApp.Enum(), Term: proto.Uint64(term - 1), Index: proto.Uint64(raftlog.InitialIndex), LogTerm: proto.Uint64(raftlog.InitialTerm),
		Commit: proto.Uint64(last), Entries: []*raftpb.Entry{{Index: proto.Uint64(raftlog.InitialIndex + 1), Term: proto.Uint64(term - 1)}}}
	rewrite := proto.Clone(stale).(*raftpb.Message)
	rewrite.Term = proto.Uint64(term + 1)
	rewrite.Entries[0].Term = proto.Uint64(term + 1)
	for _, tc := range []struct {
		name string
		msg  *raftpb.Message
		ok   bool
	}{
		{"append committing past its entries", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Term: proto.Uint64(term), Index: proto.Uint64(last), LogTerm: proto.Uint64(raftlog.InitialTerm),
			Commit: proto.Uint64(last + 5000), Entries: []*raftpb.Entry{{Index: proto.Uint64(last + 1), Term: proto.Uint64(raftlog.InitialTerm + 1)}}}, true},
		{"heartbeat committing past the log", &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Term: proto.Uint64(term), Commit: proto.Uint64(last + 1)}, false},
		{"heartbeat within the log", &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Term: proto.Uint64(term), Commit: proto.Uint64(last)}, true},
		// raft ignores a message of an earlier term: nothing in it can reach the log.
		{"a deposed leader's append over committed entries", stale, true},
		{"a deposed leader's heartbeat past the log", &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Term: proto.Uint64(term - 1), Commit: proto.Uint64(last + 1)}, true},
		{"a later term's append rewriting a committed entry", rewrite, false},
	} {
		r.mu.Lock()
		err := r.log.CheckMessage(tc.msg)
		r.mu.Unlock()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
