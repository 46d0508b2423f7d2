package replica

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// readCounts returns the store's lease and ReadIndex read counters.
func readCounts(s *Store) (lease, readIndex uint64) {
	st := s.LoopStats()
	return st.LeaseReads, st.ReadIndexReads
}

func TestLeaseReads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
	}{{"leases on", false}, {"leases off", true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newStoreEnv(t)
			boot := NewStore(Config{NodeID: 1, Engine: env.eng, Transport: env.tr})
			if err := boot.Bootstrap(userDesc(FirstUserRangeID, "", ""), nil); err != nil {
				t.Fatal(err)
			}
			s := env.startWith(Config{TickInterval: 10 * time.Millisecond, DisableLeaseReads: tc.disable})
			r := s.Replica(FirstUserRangeID)
			lead(t, r)
			propose(t, r, putCmd("k", "v1"))

			// The first read proves leadership with a ReadIndex round; the next ones ride its lease.
			wantValue(t, r, "k", "v1")
			l0, ri0 := readCounts(s)
			if ri0 == 0 {
				t.Fatalf("first read: %d ReadIndex reads, want at least 1", ri0)
			}
			for i := 0; i < 10; i++ {
				wantValue(t, r, "k", "v1")
			}
			l1, ri1 := readCounts(s)
			if tc.disable {
				if l1 != 0 || ri1-ri0 != 10 {
					t.Fatalf("leases off: %d lease reads and %d more ReadIndex reads, want 0 and 10", l1, ri1-ri0)
				}
				return
			}
			if l1-l0 == 0 {
				t.Fatalf("no read was served under the lease (lease %d, ReadIndex %d)", l1, ri1)
			}
			// A write acknowledged under the lease is seen by the next lease read.
			propose(t, r, putCmd("k", "v2"))
			wantValue(t, r, "k", "v2")

			// An expired lease (the monotonic clock moved on, as after a pause) is not used.
			r.mu.Lock()
			r.leaseUntil = time.Now().Add(-time.Millisecond)
			r.mu.Unlock()
			_, riBefore := readCounts(s)
			wantValue(t, r, "k", "v2")
			if _, ri := readCounts(s); ri == riBefore {
				t.Fatalf("a read after the lease expired did not run a ReadIndex round")
			}

			// A leadership transfer drops the lease and no new one is taken for a while.
			r.mu.Lock()
			r.dropLeaseLocked(time.Now())
			r.mu.Unlock()
			l2, _ := readCounts(s)
			for i := 0; i < 5; i++ {
				wantValue(t, r, "k", "v2")
			}
			if l3, _ := readCounts(s); l3 != l2 {
				t.Fatalf("%d reads used a lease right after a transfer started", l3-l2)
			}
		})
	}
}

func TestVoteBlackoutAfterRestart(t *testing.T) {
	r := &Replica{noVotesUntil: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		msg  *raftpb.Message
		drop bool
	}{
		{&raftpb.Message{Type: raftpb.MsgVote.Enum()}, true},
		{&raftpb.Message{Type: raftpb.MsgPreVote.Enum()}, true},
		{&raftpb.Message{Type: raftpb.MsgVote.Enum(), Context: []byte(campaignTransfer)}, false},
		{&raftpb.Message{Type: raftpb.MsgApp.Enum()}, false},
		{&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum()}, false},
	} {
		if got := r.voteBlackoutLocked(tc.msg); got != tc.drop {
			t.Errorf("%s (context %q): drop = %v, want %v", tc.msg.GetType(), tc.msg.GetContext(), got, tc.drop)
		}
	}
	r.noVotesUntil = time.Now().Add(-time.Millisecond)
	if r.voteBlackoutLocked(&raftpb.Message{Type: raftpb.MsgVote.Enum()}) {
		t.Error("a vote was dropped after the blackout ended")
	}
}
