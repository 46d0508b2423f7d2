package sim

import (
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/sim/des"
	"github.com/shoaldb/shoal/sim/workload"
)

// TestStreamHashShare: the unaligned hash sends about 1/N of a range's keys to any one node, and a
// node it does not list gets none.
func TestStreamHashShare(t *testing.T) {
	records := int64(4 * 20000)
	c := newCluster(DefaultParams(), des.New(epoch), 1, clusterSpec{nodes: 4, ranges: 4, rf: 3, records: records,
		valueBytes: 256, dist: workload.Uniform{N: records}, rate: workload.Constant(1000), readFrac: 0.5})
	j := newStreamJob(c, 0.03, 0)
	if len(j.listed) != 4 {
		t.Fatalf("the hash lists %d nodes, want the 4 live ones", len(j.listed))
	}
	for _, r := range c.order {
		if got := j.hashLocal(c, r); math.Abs(got-0.25) > 0.02 {
			t.Errorf("r%d: %.3f of its keys hash to its leader, want about 1/4", r.id, got)
		}
	}
	r := c.order[0]
	r.leader = 99 // a node the hash never listed (one that joined after the job started)
	if got := j.hashLocal(c, r); got != 0 {
		t.Errorf("a node the hash does not list gets %.3f of the keys", got)
	}
}

// TestStreamLocalityUnderMoves: on the stream scenario shrunk to 16 nodes with 2 joining, aligned
// tasks access their state locally throughout, the hand-off after each leadership change shows as
// re-routed events, tasks placed once lose locality as the autopilot moves leaderships, and the
// hash keeps about 1/N.
func TestStreamLocalityUnderMoves(t *testing.T) {
	sc, ok := Lookup("stream-64")
	if !ok {
		t.Fatal("no scenario stream-64")
	}
	sc.OpsPerSec = 16_000
	sc.Events = []Event{{At: 40 * time.Second, Do: JoinNodes, N: 2}}
	res, err := Run(sc, Options{Seed: 1, Nodes: 16, Ranges: 128, Duration: 120 * time.Second, OnlyPolicyOn: true})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Report.Runs[0].Stream
	if s == nil || s.Events == 0 {
		t.Fatalf("no stream events counted: %+v", s)
	}
	t.Logf("%d events: aligned %.4f local (%d re-routed), placed %.4f, unaligned %.4f over %d nodes",
		s.Events, s.Aligned, s.Rerouted, s.Placed, s.Unaligned, s.ListedNodes)
	if s.Aligned != 1 {
		t.Errorf("aligned tasks: %.4f of state accesses local, want 1", s.Aligned)
	}
	if s.ListedNodes != 16 || s.Unaligned < 0.5/16 || s.Unaligned > 1.5/16 {
		t.Errorf("unaligned: %.4f local over %d listed nodes, want about 1/16", s.Unaligned, s.ListedNodes)
	}
	if s.Placed >= 1 || s.Rerouted == 0 {
		t.Errorf("placed %.4f local with %d events re-routed: the autopilot moved no leadership?", s.Placed, s.Rerouted)
	}
	first, last := s.Windows[0], s.Windows[len(s.Windows)-1]
	if last.Placed >= first.Placed {
		t.Errorf("placed tasks %.4f local at the end, %.4f at the start: the join's moves cost them nothing", last.Placed, first.Placed)
	}
	if want := int(math.Ceil((120 - 10) / streamWindow)); len(s.Windows) != want {
		t.Errorf("%d windows, want %d", len(s.Windows), want)
	}
}
