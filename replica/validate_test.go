package replica

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A lagging follower gets appends whose commit index is past the entries they carry (the leader
// sends its own commit index; raft clamps it): they must be accepted, or the follower stalls until a
// snapshot. A heartbeat committing past the follower's log is refused (raft would panic on it).
func TestCheckAgainstLogCommitIndexes(t *testing.T) {
	env := newStoreEnv(t)
	boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
	if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
		t.Fatal(err)
	}
	s := env.start(10 * time.Millisecond)
	r := s.Replica(FirstUserRangeID)
	r.mu.Lock()
	last := r.log.lastIndex
	r.mu.Unlock()
	for _, tc := range []struct {
		name string
		msg  *raftpb.Message
		ok   bool
	}{
		{"append committing past its entries", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Index: proto.Uint64(last), LogTerm: proto.Uint64(initialTerm),
			Commit: proto.Uint64(last + 5000), Entries: []*raftpb.Entry{{Index: proto.Uint64(last + 1), Term: proto.Uint64(initialTerm + 1)}}}, true},
		{"heartbeat committing past the log", &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Commit: proto.Uint64(last + 1)}, false},
		{"heartbeat within the log", &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Commit: proto.Uint64(last)}, true},
	} {
		r.mu.Lock()
		err := r.checkAgainstLogLocked(tc.msg)
		r.mu.Unlock()
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
