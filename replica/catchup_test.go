package replica

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// TestCatchUpBacklogSentInBoundedSteps: a follower that missed 2 MB of writes (a restarted node)
// and acknowledges the leader's probe receives its backlog a bounded amount at a time, not all of it
// at once: the leader reads and encodes what it sends under the range's mutex, while the range's
// reads and writes wait.
func TestCatchUpBacklogSentInBoundedSteps(t *testing.T) {
	env := newStoreEnv(t)
	env.bootstrapWithLearner(t)
	s := env.startWith(Config{TickInterval: time.Hour, LogTruncateThreshold: 1 << 20})
	r := s.Replica(FirstUserRangeID)
	lead(t, r) // the learner does not vote: node 1 alone is a quorum
	val := strings.Repeat("v", 8<<10)
	const writes = 256 // 2 MiB the silent learner misses
	for i := range writes {
		propose(t, r, putCmd(fmt.Sprintf("k%04d", i), val))
	}
	appends := func() (msgs []*raftpb.Message) {
		for _, m := range env.tr.messages() {
			msg := &raftpb.Message{}
			if err := proto.Unmarshal(m.Message, msg); err != nil {
				t.Fatal(err)
			}
			if m.ToNode == 2 && msg.GetType() == raftpb.MsgApp {
				msgs = append(msgs, msg)
			}
		}
		return msgs
	}
	sent := appends()
	if len(sent) == 0 {
		t.Fatal("the leader sent no append to the learner")
	}
	probe := sent[len(sent)-1] // the learner, in probe state, was sent one append and no more
	last := probe.GetIndex() + uint64(len(probe.GetEntries()))
	ack := &raftpb.Message{Type: raftpb.MsgAppResp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(probe.GetTerm()),
		Index: proto.Uint64(last)}
	data, err := proto.Marshal(ack)
	if err != nil {
		t.Fatal(err)
	}
	s.HandleRaftMessages([]*pb.RaftMessage{{RangeId: FirstUserRangeID, FromNode: 2, ToNode: 1, Message: data}})
	waitFor(t, "appends after the learner's acknowledgement", func() bool { return len(appends()) > len(sent) })
	time.Sleep(100 * time.Millisecond) // whatever else the acknowledgement lets the leader send
	var bytes int
	for _, m := range appends()[len(sent):] {
		for _, e := range m.GetEntries() {
			bytes += len(e.GetData())
		}
	}
	if bytes == 0 || bytes > 2*maxInflightAppendBytes {
		t.Fatalf("the leader sent %d bytes of entries on one acknowledgement (%d writes of %d bytes missed); want at most %d", bytes, writes, len(val), 2*maxInflightAppendBytes)
	}
	t.Logf("one acknowledgement: %d bytes of entries sent of the %d missed", bytes, writes*len(val))
}
