package replica

import (
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// A message to a replica that is being destroyed never creates a new replica in its place: the
// destruction deletes the range's raft log, and a replica created on that log in the meantime would
// find its entries gone (raft panics reading them). Messages race each destruction here; afterwards
// no replica of the range may exist.
func TestMessageDuringDestroyCreatesNoReplica(t *testing.T) {
	env := newStoreEnv(t)
	s := env.start(time.Hour) // no ticks: nothing but this test touches the replicas
	hb := func(rangeID uint64) *raftpb.Message {
		typ, to, from, term := raftpb.MsgHeartbeat, uint64(1), uint64(2), uint64(1)
		return &raftpb.Message{Type: &typ, To: &to, From: &from, Term: &term}
	}
	for rangeID := uint64(100); rangeID < 300; rangeID++ {
		r := s.replicaForMessage(rangeID, hb(rangeID))
		if r == nil {
			t.Fatalf("range %d: no replica created for a heartbeat", rangeID)
		}
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			s.destroyReplica(r, "removed from the range")
		})
		wg.Go(func() {
			for {
				if nr := s.replicaForMessage(rangeID, hb(rangeID)); nr != nil && nr != r {
					return // recreated: checked below
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		wg.Wait()
		if nr := s.Replica(rangeID); nr != nil {
			t.Fatalf("range %d: a message during its destruction created replica %d on the deleted log", rangeID, nr.replicaID)
		}
	}
}
