package replica

import (
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// TestMissedTicks: a replica woken for a silent leader catches up on the ticks since the last raft
// message from the leader's node, never more than an election timeout (the leader's lease counts on
// the followers' clocks), and none for a node not heard from since the start.
func TestMissedTicks(t *testing.T) {
	s := NewStore(Config{TickInterval: 100 * time.Millisecond, ElectionTicks: 10})
	s.heardFrom([]*pb.RaftMessage{{FromNode: 2}, {FromNode: 2}, {FromNode: 3}})
	if m := s.missedTicks(2); m != 0 {
		t.Fatalf("just heard from n2: %d missed ticks", m)
	}
	now := time.Now()
	s.heard[2], s.heard[3] = now.Add(-350*time.Millisecond), now.Add(-time.Minute)
	if m := s.missedTicks(2); m != 3 {
		t.Fatalf("n2 silent 350 ms: %d missed ticks, want 3", m)
	}
	if m := s.missedTicks(3); m != 10 {
		t.Fatalf("n3 silent a minute: %d missed ticks, want the election timeout's 10", m)
	}
	if m := s.missedTicks(4); m != 0 {
		t.Fatalf("n4 never heard: %d missed ticks, want 0", m)
	}
}
