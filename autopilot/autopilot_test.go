package autopilot

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/executor"
	"github.com/shoaldb/shoal/autopilot/internal/fake"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
	"github.com/shoaldb/shoal/autopilot/policy"
)

// hotCluster: three nodes with balanced leaderships and replicas; r2 will carry all the load.
const hotCluster = `
node 1
node 2
node 3
range 1 [,) voters=1,2,3 leader=2 system
range 2 [user,userz) voters=1,2,3 leader=1 bytes=8MiB
range 3 [userz,) voters=1,2,3 leader=3 bytes=8MiB
`

// zipfianLoad draws YCSB zipfian keys over 100 k ordered records.
func zipfianLoad(seed int64) func() []byte {
	g := generator.NewZipfianWithRange(0, 99_999, generator.ZipfianConstant)
	r := rand.New(rand.NewSource(seed))
	return func() []byte { return fmt.Appendf(nil, "user%010d", g.Next(r)) }
}

// run drives the autopilot inline for n one-second rounds and returns every proposal.
func run(ap *Autopilot, f *fake.Cluster, n int) []*operator.Operator {
	var proposed []*operator.Operator
	for i := 0; i < n; i++ {
		f.Advance(time.Second)
		proposed = append(proposed, ap.Step(context.Background(), f.Snapshot()).Proposed...)
	}
	return proposed
}

func inline() Config { return Config{Executor: executor.Config{Inline: true}} }

func find(entries []decisions.Entry, policyName, kind string) (decisions.Entry, bool) {
	for _, e := range entries {
		if e.Policy == policyName && strings.HasPrefix(e.Operator, kind+" ") {
			return e, true
		}
	}
	return decisions.Entry{}, false
}

// TestHotRangeIsSplitAndItsHalvesSpread: a zipfian load of 3000 ops/s on one range. load_split splits it
// at a key that balances the load (measured after the split: halves within 10 %), then rebalance moves
// one half's leadership to another node, so the halves are served by different nodes.
func TestHotRangeIsSplitAndItsHalvesSpread(t *testing.T) {
	f := fake.MustNew(t, hotCluster)
	f.SetLoad(3000, zipfianLoad(1))
	ap := New(f, f, inline())
	run(ap, f, 60)

	f.Advance(20 * time.Second) // measure the halves over 60 k requests rather than one second's 3 k
	c := f.Snapshot()
	log := ap.Decisions().Entries()
	split, ok := find(log, policy.NameLoadSplit, operator.KindSplit)
	if !ok || split.Status != decisions.StatusSucceeded {
		t.Fatalf("no successful load split; decisions:\n%s", dump(log))
	}
	user := c.UserRanges()
	if len(user) != 3 {
		t.Fatalf("want r2 split in two (3 user ranges), got:\n%s", c.Format())
	}
	left, right := user[0], user[1]
	lq, rq := left.QPS(), right.QPS()
	if im := operator.Imbalance(lq, rq); im > 0.10 {
		t.Fatalf("halves serve %.0f and %.0f ops/s: %.1f%% apart, want ≤ 10%%", lq, rq, 100*im)
	}
	if left.Leader == right.Leader {
		t.Fatalf("both halves led by n%d:\n%s\ndecisions:\n%s", left.Leader, c.Format(), dump(log))
	}
	if _, ok := find(log, policy.NameRebalance, operator.KindTransferLeader); !ok {
		t.Fatalf("no rebalance transfer; decisions:\n%s", dump(log))
	}
	if split.Measured == nil || !strings.Contains(split.Measured.Detail, "apart") {
		t.Fatalf("split not measured: %+v", split)
	}
	t.Logf("split %s; halves %.0f / %.0f ops/s (%.1f%% apart); measured: %s", split.Operator, lq, rq,
		100*operator.Imbalance(lq, rq), split.Measured.Detail)
}

// TestPolicySwitchedOffProposesNothing: the same cluster and load with load_split off: no operator at
// all is proposed (the others have nothing to fix), and the range stays whole.
func TestPolicySwitchedOffProposesNothing(t *testing.T) {
	f := fake.MustNew(t, hotCluster)
	f.SetLoad(3000, zipfianLoad(1))
	ap := New(f, f, inline())
	if err := ap.SetPolicy(policy.NameLoadSplit, false); err != nil {
		t.Fatal(err)
	}
	if proposed := run(ap, f, 60); len(proposed) != 0 {
		t.Fatalf("proposed %d operators with load_split off, first: %s (%s)", len(proposed), proposed[0], proposed[0].Reason)
	}
	if n := len(f.Snapshot().UserRanges()); n != 2 {
		t.Fatalf("%d user ranges, want 2 (no split)", n)
	}
	if err := ap.SetPolicy("autoscale", true); err == nil {
		t.Fatal("unknown policy accepted")
	}
}

// TestDeadNodeIsReplaced: n3 stops heartbeating; nothing happens while it is merely suspect, and once it
// has been silent for 60 s each of its replicas is replaced on the node without one, in one joint change
// (n3 leaves the descriptor as the new voter joins).
func TestDeadNodeIsReplaced(t *testing.T) {
	f := fake.MustNew(t, `
node 1
node 2
node 3
node 4
range 1 [,) voters=1,2,3 leader=1 system
range 2 [a,g) voters=2,3,4 leader=2 bytes=8MiB
range 3 [g,m) voters=3,4,1 leader=3 bytes=8MiB
range 4 [m,) voters=4,1,2 leader=4 bytes=8MiB
`)
	ap := New(f, f, inline())
	f.UpdateNode(3, func(n *model.Node) { n.Live = false })
	if proposed := run(ap, f, 59); len(proposed) != 0 {
		t.Fatalf("proposed %s while n3 was only suspect", proposed[0])
	}
	run(ap, f, 10)
	c := f.Snapshot()
	for _, r := range c.Ranges {
		if r.HasReplica(3) || len(r.Voters()) != 3 {
			t.Fatalf("r%d not re-replicated: %v\ndecisions:\n%s", r.ID, r.Replicas, dump(ap.Decisions().Entries()))
		}
	}
	for _, n := range []uint64{1, 2, 4} {
		if got := c.Node(n).Replicas; got != 4 {
			t.Errorf("n%d holds %d replicas, want 4", n, got)
		}
	}
}

// TestDecommissionEmptiesAndMarksTheNode: replicas move off n3, then the node is marked
// decommissioned through the Decommissioner.
func TestDecommissionEmptiesAndMarksTheNode(t *testing.T) {
	f := fake.MustNew(t, `
node 1
node 2
node 3 decommissioning
node 4
range 1 [,) voters=1,2,3 leader=3 system
range 2 [a,m) voters=1,2,3 leader=3 bytes=8MiB
range 3 [m,) voters=1,2,3 leader=1 bytes=8MiB
`)
	ap := New(f, f, inline())
	run(ap, f, 20)
	c := f.Snapshot()
	if n := c.Node(3); !n.Decommissioned || n.Replicas != 0 {
		t.Fatalf("n3 %+v\n%s\ndecisions:\n%s", *n, c.Format(), dump(ap.Decisions().Entries()))
	}
	if _, ok := find(ap.Decisions().Entries(), policy.NameDecommission, "mark"); !ok {
		t.Fatal("marking not in the decision log")
	}
}

// TestSwitchingOffCancelsPendingOperators: a policy switched off stops its running operators.
func TestSwitchingOffCancelsPendingOperators(t *testing.T) {
	f := fake.MustNew(t, `
node 1
node 2
node 3
range 2 [a,m) voters=1,2 leader=1 bytes=8MiB
`)
	f.Hook = func(ctx context.Context, c fake.Call) error { <-ctx.Done(); return ctx.Err() }
	ap := New(f, f, Config{})
	round := ap.Tick(context.Background(), f.Snapshot())
	if len(round.Submitted) != 1 {
		t.Fatalf("submitted %v, want replicate's add-replica", round.Submitted)
	}
	ap.Executor().Reconcile(f.Snapshot()) // issues the blocked add-learner
	if err := ap.SetPolicy(policy.NameReplicate, false); err != nil {
		t.Fatal(err)
	}
	if len(ap.Executor().Pending()) != 0 {
		t.Fatal("replicate's operator still pending")
	}
	e, _ := ap.Decisions().Get(round.Submitted[0].ID)
	if e.Status != "canceled: policy replicate switched off" {
		t.Fatalf("status %q", e.Status)
	}
	ap.Stop()
	ap.Executor().Stop()
}

// TestStartStop runs the real goroutines: a draining node's leaderships move away while the autopilot
// runs; Stop is idempotent and Start works again.
func TestStartStop(t *testing.T) {
	f := fake.MustNew(t, `
node 1 draining
node 2
node 3
range 1 [,) voters=1,2,3 leader=1 system
range 2 [a,m) voters=1,2,3 leader=1
range 3 [m,) voters=1,2,3 leader=1
`)
	f.Tick = 10 * time.Millisecond
	ap := New(f, f, Config{Interval: 5 * time.Millisecond, Executor: executor.Config{Interval: 2 * time.Millisecond}})
	ap.Start()
	ap.Start() // no-op
	deadline := time.Now().Add(10 * time.Second)
	for f.Snapshot().Node(1).Leaders > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("leaderships not drained:\n%s", dump(ap.Decisions().Entries()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	ap.Stop()
	ap.Stop() // no-op
	ap.Start()
	ap.Stop()
	for _, e := range ap.Decisions().Entries() {
		if e.Policy == policy.NameDrain && e.Status != decisions.StatusSucceeded {
			t.Errorf("drain decision %d: %s", e.ID, e.Status)
		}
	}
}

func TestInvalidConfigIsRejected(t *testing.T) {
	cfg := Config{Policies: policy.Config{Merge: policy.MergeConfig{MaxQPS: 2000}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "split and merged back and forth") {
		t.Fatalf("error %v", err)
	}
}

func dump(entries []decisions.Entry) string {
	var b bytes.Buffer
	for _, e := range entries {
		fmt.Fprintf(&b, "#%d %s %s [%s] %s | %s\n", e.ID, e.Policy, e.Operator, e.Status, e.Reason, e.Predicted)
	}
	return b.String()
}

// TestJoinMovesFollowEachOtherWithoutWaitingForRounds: with a regular round that never comes (an
// hour's interval), one manual round starts a join and the executor's progress reports drive the
// rest of it: each move is planned as soon as the previous one made progress, not a round later.
func TestJoinMovesFollowEachOtherWithoutWaitingForRounds(t *testing.T) {
	f := fake.MustNew(t, `
node 1
node 2
node 3
node 4
range 1 [,) voters=1,2,3 leader=1 system
range 2 [a,c) voters=1,2,3 leader=1 reads=100
range 3 [c,e) voters=1,2,3 leader=2 reads=900
range 4 [e,g) voters=1,2,3 leader=3 reads=50
range 5 [g,k) voters=1,2,3 leader=1 reads=400
range 6 [k,p) voters=1,2,3 leader=2 reads=700
range 7 [p,) voters=1,2,3 leader=3 reads=10
`)
	f.Tick = 10 * time.Millisecond
	ap := New(f, f, Config{Interval: time.Hour, Executor: executor.Config{Interval: 2 * time.Millisecond}})
	if round := ap.Tick(context.Background(), f.Snapshot()); len(round.Submitted) != 1 {
		t.Fatalf("first round submitted %v, want the join's first move", round.Submitted)
	}
	ap.Start()
	defer ap.Stop()
	// n4's share: floor(18 user replicas / 4 nodes) = 4.
	deadline := time.Now().Add(10 * time.Second)
	for f.Snapshot().Node(4).Replicas < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("n4 holds %d replicas, want 4, with no regular round:\n%s", f.Snapshot().Node(4).Replicas,
				dump(ap.Decisions().Entries()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, e := range ap.Decisions().Entries() {
		if e.Policy != policy.NameJoin {
			t.Errorf("decision by %s in a reactive round (only reactive policies run there): %s", e.Policy, e.Operator)
		}
	}
}

// flakyRecorder is the fake cluster with join records whose first writes fail (say, the meta range
// lost its leader).
type flakyRecorder struct {
	*fake.Cluster
	failures int
	written  []model.Join
}

func (r *flakyRecorder) RecordJoin(_ context.Context, _ uint64, j model.Join) error {
	if r.failures > 0 {
		r.failures--
		return fmt.Errorf("meta range unavailable")
	}
	r.written = append(r.written, j)
	return nil
}

// TestFailedJoinRecordIsWrittenAgain: a join record whose write failed is written at the next round
// (the policy decides each change once, so without it a lost "done" left the join open for ever),
// and once written it is not written again.
func TestFailedJoinRecordIsWrittenAgain(t *testing.T) {
	f := fake.MustNew(t, `
node 1
node 2
node 3
node 4
range 1 [,) voters=1,2,3 leader=1 system
range 2 [a,m) voters=1,2,3 leader=1 reads=100
range 3 [m,) voters=1,2,3 leader=2 reads=50
`)
	r := &flakyRecorder{Cluster: f, failures: 2}
	ap := New(f, r, Config{Interval: time.Hour})
	ctx := context.Background()
	ap.Tick(ctx, f.Snapshot()) // the join starts: its record's write fails
	if len(r.written) != 0 || len(ap.unrecorded) != 1 {
		t.Fatalf("after a failed write: written %v, unrecorded %v", r.written, ap.unrecorded)
	}
	ap.Tick(ctx, f.Snapshot()) // fails again
	ap.Tick(ctx, f.Snapshot()) // written
	if len(r.written) != 1 || r.written[0].Target != 1 || len(ap.unrecorded) != 0 {
		t.Fatalf("after the third round: written %+v, unrecorded %v", r.written, ap.unrecorded)
	}
	notes := 0
	for _, e := range ap.Decisions().Entries() {
		if e.Policy == policy.NameJoin && strings.HasPrefix(e.Operator, "n4 joining") {
			notes++
			if notes > 1 && !strings.HasPrefix(e.Reason, writtenAgain) {
				t.Errorf("retry logged as %q", e.Reason)
			}
		}
	}
	if notes != 3 {
		t.Errorf("%d decision-log notes of n4's join record, want one per write (3):\n%s", notes, dump(ap.Decisions().Entries()))
	}
	ap.Tick(ctx, f.Snapshot())
	if len(r.written) != 1 {
		t.Errorf("a written record was written again: %+v", r.written)
	}
}
