package silence

import (
	"slices"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

type nodes map[uint64]time.Time // node id → last heard

func (n nodes) All() []*pb.NodeDescriptor {
	var out []*pb.NodeDescriptor
	for id := range n {
		out = append(out, &pb.NodeDescriptor{NodeId: id})
	}
	return out
}

func (n nodes) LastHeard(id uint64) time.Time { return n[id] }

type waker struct{ woken []uint64 }

func (w *waker) WakeReplicasLedBy(node uint64) { w.woken = append(w.woken, node) }

// TestWakesSilentNodes: with a 1-s heartbeat and a 1-s election timeout a node is silent past
// 1.5 s; its replicas are woken once, again a heartbeat later while it stays silent, never for
// this node itself or a node heard from within the bound, and a node heard again is forgotten (its
// next silence wakes at once).
func TestWakesSilentNodes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ns := nodes{1: t0, 2: t0, 3: t0}
	w := &waker{}
	rc := replica.Config{ElectionTicks: 10, TickInterval: 100 * time.Millisecond}
	watch := New(1, ns, w, time.Second, rc)
	if watch.After() != 1500*time.Millisecond {
		t.Fatalf("after = %v, want 1.5s", watch.After())
	}
	step := func(at time.Duration, want ...uint64) {
		t.Helper()
		w.woken = nil
		watch.check(t0.Add(at))
		slices.Sort(w.woken)
		if !slices.Equal(w.woken, want) {
			t.Fatalf("at +%v woken %v, want %v", at, w.woken, want)
		}
	}
	ns[2] = t0.Add(time.Second) // n2 keeps answering until +1 s; n3 and n1 (self) fall silent at 0
	step(1500 * time.Millisecond)
	step(1600*time.Millisecond, 3)
	step(2000 * time.Millisecond)
	step(2600*time.Millisecond, 2, 3) // n3 again a heartbeat later, n2 past its own bound
	ns[3] = t0.Add(2700 * time.Millisecond)
	step(2800 * time.Millisecond)
	step(4300*time.Millisecond, 2, 3) // n3 silent again after it was heard: woken at once
}
