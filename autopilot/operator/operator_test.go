package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
)

func parse(t *testing.T, text string) *model.Cluster {
	t.Helper()
	c, err := model.ParseCluster(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const cluster4 = `
node 1
node 2
node 3
node 4
range 2 [a,m) voters=1,2,3 leader=1 bytes=64MiB reads=900 writes=100
range 3 [m,) voters=1,2,3 leader=2 bytes=1MiB
`

func TestStepsAreDeclarative(t *testing.T) {
	c := parse(t, cluster4)
	r := c.Range(2)
	for _, tc := range []struct {
		step Step
		want bool
	}{
		{AddLearner{Node: 1}, true},
		{AddLearner{Node: 4}, false},
		{PromoteVoter{Node: 2}, true},
		{PromoteVoter{Node: 2, Remove: 3}, false},
		{RemoveReplica{Node: 4}, true},
		{RemoveReplica{Node: 3}, false},
		{TransferLeader{To: 1}, true},
		{TransferLeader{To: 2}, false},
		{Split{Key: []byte("m")}, true},
		{Split{Key: []byte("g")}, false},
		{Merge{RightRangeID: 3, RightEndKey: []byte("m")}, true}, // r2 already reaches the right end
		{Merge{RightRangeID: 3, RightEndKey: []byte("z")}, false},
	} {
		if got := tc.step.IsFinished(r); got != tc.want {
			t.Errorf("%s.IsFinished(r2) = %v, want %v", tc.step, got, tc.want)
		}
		// Applying a step always makes it finished.
		if !tc.step.IsFinished(tc.step.Apply(r)) {
			t.Errorf("%s is not finished on its own result", tc.step)
		}
	}
}

func TestMoveReplicaPlansLeadershipAndInfluence(t *testing.T) {
	c := parse(t, cluster4)
	r := c.Range(2)
	op := NewMoveReplica("rebalance", c.Now, c, r, 1, 4, "test")
	if got, want := op.String(), "move-replica r2: add-learner n4, promote-voter n4, transfer-leader n4, remove-replica n1"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := op.Influence.String(), "n1: -1 replicas -1 leaders -64MiB -1000 qps; n4: +1 replicas +1 leaders +64MiB +1000 qps"; got != want {
		t.Fatalf("influence %q, want %q", got, want)
	}
	// A follower's replica moves in one joint change.
	op = NewMoveReplica("rebalance", c.Now, c, r, 3, 4, "test")
	if got, want := op.String(), "move-replica r2: add-learner n4, promote-voter n4 (remove n3)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// What remains once the learner is in: only the removal's and promotion's part.
	withLearner := AddLearner{Node: 4}.Apply(r)
	if got, want := op.PendingInfluence(withLearner).String(), "n3: -1 replicas -64MiB"; got != want {
		t.Fatalf("pending influence %q, want %q", got, want)
	}
	if op.FirstUnfinished(withLearner) != 1 || op.IsFinished(withLearner) {
		t.Fatal("resume point wrong")
	}
}

func TestTimeoutsScaleWithBytes(t *testing.T) {
	c := parse(t, cluster4)
	r := c.Range(2) // 64 MiB
	tm := DefaultTimeouts
	if got := tm.Step(AddLearner{Node: 4}, r); got != 10*time.Second+4*time.Second {
		t.Fatalf("add-learner of 64 MiB at 32 MiB/s: %s, want 14s", got)
	}
	if got := tm.Step(TransferLeader{To: 2}, r); got != 10*time.Second {
		t.Fatalf("transfer-leader: %s, want 10s", got)
	}
	slow := Timeouts{SnapshotRate: 1 << 20, Base: time.Second, Slack: 1}
	if got := slow.Step(AddLearner{Node: 4}, r); got != 65*time.Second {
		t.Fatalf("64 MiB at 1 MiB/s: %s, want 65s", got)
	}
	if got := tm.Step(PromoteVoter{Node: 4}, r); got != 14*time.Second {
		t.Fatalf("promote-voter of 64 MiB (it may wait for the snapshot): %s, want 14s", got)
	}
	op := NewAddReplica("replicate", c.Now, r, 4, "test")
	if op.Timeout != 28*time.Second {
		t.Fatalf("operator timeout %s, want 28s (14s + 14s)", op.Timeout)
	}
}

func TestChecksExplainContradictions(t *testing.T) {
	c := parse(t, `
node 1
node 2
node 3
node 4 draining
node 5 dead
range 2 [a,m) voters=1,2,3 leader=1
range 3 [m,x) voters=1,2,3 leader=1
range 4 [y,) voters=1,2,3 leader=1
`)
	r := c.Range(2)
	for _, tc := range []struct {
		step Step
		want string
	}{
		{AddLearner{Node: 4}, "n4 is draining"},
		{AddLearner{Node: 5}, "n5 is not live"},
		{AddLearner{Node: 9}, "n9 left the cluster"},
		{PromoteVoter{Node: 4}, "no replica on n4"},
		{TransferLeader{To: 5}, "n5 holds no voter"},
		{RemoveReplica{Node: 1}, "n1 leads r2"},
		{Split{Key: []byte("z")}, "no longer inside"},
		{Merge{RightRangeID: 3, RightEndKey: []byte("y")}, "no longer ends at"},
		{Merge{RightRangeID: 4}, "no longer starts where"},
		{Merge{RightRangeID: 9}, "is gone"},
	} {
		err := tc.step.Check(c, r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want …%s", tc.step, err, tc.want)
		}
	}
	if err := (AddLearner{Node: 3}).Check(c, r); err != nil {
		t.Errorf("usable target: %v", err)
	}
}

func TestMergeNeedsColocatedReplicas(t *testing.T) {
	c := parse(t, `
node 1
node 2
node 3
node 4
range 2 [a,m) voters=1,2,3
range 3 [m,) voters=1,2,4
`)
	if _, err := NewMerge("merge", c.Now, c.Range(2), c.Range(3), "x"); err == nil {
		t.Fatal("merge of ranges on different nodes accepted")
	}
}

func TestMeasure(t *testing.T) {
	c := parse(t, cluster4)
	for _, tc := range []struct {
		b    Benefit
		want float64
	}{
		{Benefit{Metric: MetricReplicaGap, From: 1, To: 4}, 2},
		{Benefit{Metric: MetricLeaderGap, From: 1, To: 3}, 1},
		{Benefit{Metric: MetricQPSGap, From: 1, To: 2}, 1000},
		{Benefit{Metric: MetricBytesGap, From: 1, To: 4}, 65 << 20},
		{Benefit{Metric: MetricLiveVoters, Range: 2}, 3},
		{Benefit{Metric: MetricNodeLeaders, From: 1}, 1},
		{Benefit{Metric: MetricNodeReplicas, From: 4}, 0},
		{Benefit{Metric: MetricSpanMaxQPS, Start: []byte("a")}, 1000},
		{Benefit{Metric: MetricSpanRanges, Start: []byte("a")}, 2},
	} {
		got, _, ok := Measure(tc.b, c)
		if !ok || got != tc.want {
			t.Errorf("%s: %v (ok=%v), want %v", tc.b.Metric, got, ok, tc.want)
		}
	}
	if _, _, ok := Measure(Benefit{Metric: MetricReplicaGap, From: 1, To: 9}, c); ok {
		t.Error("gap to a missing node measured")
	}
	if got := Imbalance(1480, 1520); got < 0.026 || got > 0.0264 {
		t.Errorf("Imbalance(1480, 1520) = %v", got)
	}
}
