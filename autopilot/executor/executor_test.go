package executor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/internal/fake"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

const fourNodes = `
node 1
node 2
node 3
node 4
range 2 [a,f) voters=1,2,3 leader=1 bytes=64MiB
range 3 [f,m) voters=1,2,3 leader=1 bytes=64MiB
range 4 [m,t) voters=1,2,3 leader=2 bytes=64MiB
range 5 [t,) voters=1,2,3 leader=3 bytes=64MiB
`

func moveOp(t *testing.T, c *model.Cluster, rangeID, from, to uint64) *operator.Operator {
	t.Helper()
	r := c.Range(rangeID)
	op := operator.NewMoveReplica("test", c.Now, c, r, from, to, "test move")
	op.PredictedBenefit = operator.Benefit{Metric: operator.MetricReplicaGap, From: from, To: to,
		Before: float64(c.Node(from).Replicas - c.Node(to).Replicas), Delta: -2}
	return op
}

func entry(t *testing.T, e *Executor, id uint64) decisions.Entry {
	t.Helper()
	en, ok := e.Log().Get(id)
	if !ok {
		t.Fatalf("no decision %d", id)
	}
	return en
}

// waitFor polls cond (driving nothing itself) for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMoveReplicaRunsStepByStepAndIsMeasured(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	op := moveOp(t, c, 3, 3, 4) // n3 does not lead r3: add n4, promote it and remove n3 in one change
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && e.Busy(3); i++ {
		f.Advance(time.Second)
		e.Reconcile(f.Snapshot())
	}
	if e.Busy(3) {
		t.Fatalf("operator still running: %+v", e.Statuses())
	}
	var got []string
	for _, c := range f.Calls() {
		got = append(got, c.String())
	}
	if want := "add-learner r3 n4|promote-voter r3 n4 remove n3"; strings.Join(got, "|") != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
	en := entry(t, e, op.ID)
	if en.Status != decisions.StatusSucceeded || en.Measured != nil {
		t.Fatalf("entry %+v: want succeeded, not yet measured", en)
	}
	if op.StepsDone() != len(op.Steps) {
		t.Fatalf("operator reports %d of its %d steps done", op.StepsDone(), len(op.Steps))
	}
	if len(en.Steps) != 2 || en.Steps[0].Step != "add-learner n4" || en.Steps[1].Error != "" {
		t.Fatalf("entry's step timings %+v: want the two calls", en.Steps)
	}
	// Measured once the window (10 s) has passed: n3 holds 3 replicas, n4 1, as predicted.
	f.Advance(decisions.DefaultWindow)
	e.Reconcile(f.Snapshot())
	en = entry(t, e, op.ID)
	if en.Measured == nil || en.Measured.Before != 4 || en.Measured.After != 2 || en.Measured.Delta != op.PredictedBenefit.Delta {
		t.Fatalf("measured %+v, want replicas.gap 4 → 2", en.Measured)
	}
}

func TestResumesFromObservedState(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	// The learner on n4 is already there (an earlier autopilot added it before moving away).
	f.UpdateRange(3, func(r *model.Range) *model.Range {
		r.Replicas = append(r.Replicas, model.Replica{Node: 4, Learner: true})
		return r
	})
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	op := operator.NewMoveReplica("test", c.Now, c, c.Range(3), 3, 4, "resume")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		e.Reconcile(f.Snapshot())
	}
	calls := f.Calls()
	if len(calls) != 1 || calls[0].Kind != "promote-voter" {
		t.Fatalf("calls %v: want only the promotion (the learner exists)", calls)
	}
}

func TestOneOperatorPerRange(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	first := moveOp(t, c, 2, 3, 4)
	if err := e.Submit(first); err != nil {
		t.Fatal(err)
	}
	second := operator.NewTransferLeader("test", c.Now, c.Range(2), 2, "same priority")
	if err := e.Submit(second); !errors.Is(err, ErrRangeBusy) {
		t.Fatalf("second operator on r2: err %v, want ErrRangeBusy", err)
	}
	// A merge of r2 into r1... of r1 with r2 also changes r2.
	merge, err := operator.NewMerge("test", c.Now, c.Range(2), c.Range(3), "merge")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(merge); !errors.Is(err, ErrRangeBusy) {
		t.Fatalf("merge touching r2: err %v, want ErrRangeBusy", err)
	}
	// A higher-priority operator replaces the running one.
	urgent := operator.NewTransferLeader("urgent", c.Now, c.Range(2), 2, "higher priority")
	urgent.Priority = operator.PriorityHigh
	if err := e.Submit(urgent); err != nil {
		t.Fatal(err)
	}
	if st := entry(t, e, first.ID).Status; !strings.HasPrefix(st, decisions.StatusReplaced) {
		t.Fatalf("first operator status %q, want replaced", st)
	}
	if p := e.Pending(); len(p) != 1 || p[0] != urgent {
		t.Fatalf("pending %v, want only the urgent operator", p)
	}
}

func TestSnapshotLimitPerNode(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	var inflight, peak atomic.Int32
	release := make(chan struct{})
	f.Hook = func(ctx context.Context, c fake.Call) error {
		if c.Kind != "add-learner" {
			return nil
		}
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e := New(f, f, nil, Config{MaxSnapshotsPerNode: 1, Interval: time.Millisecond})
	c := f.Snapshot()
	var ops []*operator.Operator
	for _, id := range []uint64{2, 3, 4} {
		op := operator.NewAddReplica("test", c.Now, c.Range(id), 4, "add on n4")
		if err := e.Submit(op); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	e.Start()
	defer e.Stop()
	waitFor(t, "one snapshot in flight", func() bool { return inflight.Load() == 1 })
	waiting := 0
	for _, st := range e.Statuses() {
		if strings.Contains(st.Waiting, "n4 already has 1 snapshots in flight") {
			waiting++
		}
	}
	if waiting != 2 {
		t.Fatalf("statuses %+v: want 2 operators waiting for n4's snapshot slot", e.Statuses())
	}
	close(release)
	waitFor(t, "all operators done", func() bool { return len(e.Pending()) == 0 })
	if p := peak.Load(); p != 1 {
		t.Fatalf("peak snapshots to n4: %d, want 1", p)
	}
	for _, op := range ops {
		if st := entry(t, e, op.ID).Status; st != decisions.StatusSucceeded {
			t.Fatalf("operator %d: %s", op.ID, st)
		}
	}
}

func TestStepTimeoutScalesWithBytesAndCancelsTheCall(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	entered, canceled := make(chan struct{}), make(chan error, 1)
	f.Hook = func(ctx context.Context, c fake.Call) error {
		close(entered)
		<-ctx.Done()
		canceled <- ctx.Err()
		return ctx.Err()
	}
	cfg := Config{Timeouts: operator.Timeouts{SnapshotRate: 32 << 20, Base: time.Second, Slack: 2}}
	e := New(f, f, nil, cfg)
	c := f.Snapshot()
	op := operator.NewAddReplica("test", c.Now, c.Range(2), 4, "slow snapshot")
	// 64 MiB at 32 MiB/s, twice: 4 s, plus the 1 s base.
	if got := cfg.Timeouts.Step(op.Steps[0], c.Range(2)); got != 5*time.Second {
		t.Fatalf("add-learner timeout %s, want 5s", got)
	}
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(c) // issues add-learner
	<-entered
	f.Advance(4 * time.Second)
	e.Reconcile(f.Snapshot())
	if !e.Busy(2) {
		t.Fatal("timed out before the step's 5 s")
	}
	f.Advance(2 * time.Second)
	e.Reconcile(f.Snapshot())
	if st := entry(t, e, op.ID).Status; !strings.HasPrefix(st, decisions.StatusTimedOut) {
		t.Fatalf("status %q, want timed out", st)
	}
	select {
	case err := <-canceled:
		if err == nil {
			t.Fatal("call context not done")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the timed-out call was not cancelled")
	}
	e.Stop()
}

// okActuator returns success without changing anything: the model never shows the step as done.
type okActuator struct{}

func (okActuator) AddLearner(context.Context, uint64, uint64) error           { return nil }
func (okActuator) PromoteVoter(context.Context, uint64, uint64, uint64) error { return nil }
func (okActuator) RemoveReplica(context.Context, uint64, uint64) error        { return nil }
func (okActuator) TransferLeader(context.Context, uint64, uint64) error       { return nil }
func (okActuator) Split(context.Context, uint64, []byte) error                { return nil }
func (okActuator) Merge(context.Context, uint64) error                        { return nil }

func TestStepDoneOnlyWhenTheModelShowsIt(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	e := New(f, okActuator{}, nil, Config{Inline: true, Timeouts: operator.Timeouts{Base: time.Second}})
	c := f.Snapshot()
	op := operator.NewTransferLeader("test", c.Now, c.Range(2), 2, "never observed")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(c)
	e.Reconcile(f.Snapshot())
	if !e.Busy(2) {
		t.Fatal("operator finished although the model never showed the new leader")
	}
	f.Advance(2 * time.Second)
	e.Reconcile(f.Snapshot())
	if st := entry(t, e, op.ID).Status; !strings.HasPrefix(st, decisions.StatusTimedOut) {
		t.Fatalf("status %q, want timed out", st)
	}
}

func TestCancelWhenTheModelContradicts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fake.Cluster)
		want   string
	}{
		{"target draining", func(f *fake.Cluster) { f.UpdateNode(4, func(n *model.Node) { n.Draining = true }) }, "n4 is draining"},
		{"target not live", func(f *fake.Cluster) { f.UpdateNode(4, func(n *model.Node) { n.Live = false }) }, "n4 is not live"},
		{"target decommissioning", func(f *fake.Cluster) {
			f.UpdateNode(4, func(n *model.Node) { n.Decommissioning = true })
		}, "n4 is decommissioning"},
		{"range gone", func(f *fake.Cluster) { f.UpdateRange(2, func(*model.Range) *model.Range { return nil }) }, "r2 is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fake.MustNew(t, fourNodes)
			var wg sync.WaitGroup
			wg.Add(1)
			var callErr error
			entered := make(chan struct{})
			f.Hook = func(ctx context.Context, c fake.Call) error {
				defer wg.Done()
				close(entered)
				<-ctx.Done()
				callErr = ctx.Err()
				return ctx.Err()
			}
			e := New(f, f, nil, Config{})
			c := f.Snapshot()
			op := operator.NewAddReplica("test", c.Now, c.Range(2), 4, "add")
			if err := e.Submit(op); err != nil {
				t.Fatal(err)
			}
			e.Reconcile(c)
			<-entered
			tc.change(f)
			e.Reconcile(f.Snapshot())
			st := entry(t, e, op.ID).Status
			if !strings.HasPrefix(st, decisions.StatusCanceled) || !strings.Contains(st, tc.want) {
				t.Fatalf("status %q, want canceled: …%s", st, tc.want)
			}
			wg.Wait()
			if !errors.Is(callErr, context.Canceled) {
				t.Fatalf("in-flight call ended with %v, want context.Canceled", callErr)
			}
			// The executor releases the slot when the canceled call returns to it, just after the
			// hook's Done: give it a moment rather than racing it.
			for deadline := time.Now().Add(5 * time.Second); e.SnapshotsInFlight(4) != 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if n := e.SnapshotsInFlight(4); n != 0 {
				t.Fatalf("%d snapshot slots still held after cancellation", n)
			}
			e.Stop()
		})
	}
}

func TestFailedStepFailsTheOperator(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	f.Hook = func(ctx context.Context, c fake.Call) error { return errors.New("injected: disk full on n4") }
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	op := operator.NewAddReplica("test", c.Now, c.Range(2), 4, "add")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(c)
	st := entry(t, e, op.ID).Status
	if !strings.HasPrefix(st, decisions.StatusFailed) || !strings.Contains(st, "disk full on n4") {
		t.Fatalf("status %q, want failed with the actuator's error", st)
	}
}

func TestStopRecordsRunningOperatorsAsStopped(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	started := make(chan struct{})
	f.Hook = func(ctx context.Context, c fake.Call) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	e := New(f, f, nil, Config{Interval: time.Millisecond})
	c := f.Snapshot()
	op := operator.NewAddReplica("test", c.Now, c.Range(2), 4, "add")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Start()
	<-started
	e.Stop()
	if st := entry(t, e, op.ID).Status; st != decisions.StatusStopped {
		t.Fatalf("status %q, want stopped", st)
	}
	if len(e.Pending()) != 0 {
		t.Fatal("operators left after Stop")
	}
	// Restartable: a new operator runs after Start again.
	f.Hook = nil
	e.Start()
	defer e.Stop()
	op2 := operator.NewTransferLeader("test", c.Now, c.Range(2), 2, "after restart")
	if err := e.Submit(op2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "transfer after restart", func() bool { return !e.Busy(2) })
	if st := entry(t, e, op2.ID).Status; st != decisions.StatusSucceeded {
		t.Fatalf("status %q after restart", st)
	}
}

func TestCancelPolicy(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	e := New(f, okActuator{}, nil, Config{Inline: true})
	c := f.Snapshot()
	a := operator.NewTransferLeader("rebalance", c.Now, c.Range(2), 2, "a")
	b := operator.NewTransferLeader("drain", c.Now, c.Range(3), 2, "b")
	for _, op := range []*operator.Operator{a, b} {
		if err := e.Submit(op); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.CancelPolicy("rebalance", "policy rebalance switched off"); n != 1 {
		t.Fatalf("cancelled %d operators, want 1", n)
	}
	if p := e.Pending(); len(p) != 1 || p[0] != b {
		t.Fatalf("pending %v, want only drain's", p)
	}
	if st := entry(t, e, a.ID).Status; st != "canceled: policy rebalance switched off" {
		t.Fatalf("status %q", st)
	}
}

// slowSplit applies a split to the fake cluster at once but returns only when released, so the
// model shows the split while the call is still in flight.
type slowSplit struct {
	*fake.Cluster
	release chan struct{}
}

func (s slowSplit) Split(ctx context.Context, rangeID uint64, key []byte) error {
	if err := s.Cluster.Split(ctx, rangeID, key); err != nil {
		return err
	}
	<-s.release
	return nil
}

func TestStepSeenDoneWhileItsCallIsInFlightSucceeds(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	act := slowSplit{Cluster: f, release: make(chan struct{})}
	e := New(f, act, nil, Config{Timeouts: operator.Timeouts{Base: 10 * time.Second}})
	c := f.Snapshot()
	op := operator.NewSplit("test", c.Now, c.Range(2), []byte("c"), "split while the model catches up")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(c) // issues the split
	waitFor(t, "the split to show in the model", func() bool {
		r := f.Snapshot().Range(2)
		return r != nil && string(r.EndKey) == "c"
	})
	e.Reconcile(f.Snapshot()) // the split key is no longer inside r2: not a reason to cancel
	if st := entry(t, e, op.ID).Status; st != decisions.StatusRunning {
		t.Fatalf("status %q while the call is in flight, want running", st)
	}
	close(act.release)
	waitFor(t, "the operator to succeed", func() bool {
		e.Reconcile(f.Snapshot())
		return entry(t, e, op.ID).Status == decisions.StatusSucceeded
	})
	e.Stop()
}

// TestOnProgressReportsStepsAndFinishes: the executor reports a reconciliation in which an operator
// moved to its next step or finished, and stays quiet when nothing moved.
func TestOnProgressReportsStepsAndFinishes(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	var reports int
	e := New(f, f, nil, Config{Inline: true, OnProgress: func() { reports++ }})
	e.Reconcile(f.Snapshot())
	if reports != 0 {
		t.Fatalf("%d progress reports with no operator", reports)
	}
	op := moveOp(t, f.Snapshot(), 3, 3, 4) // two steps: add-learner, promote-voter removing n3
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	var perRound []int
	for i := 0; i < 4; i++ {
		before := reports
		f.Advance(time.Second)
		e.Reconcile(f.Snapshot())
		perRound = append(perRound, reports-before)
	}
	if e.Busy(3) {
		t.Fatalf("operator still running: %+v", e.Statuses())
	}
	// Inline, each reconciliation issues a step whose result the next one sees: the learner step is
	// seen done (next step) in round 2, the operator finished in round 3, nothing after.
	if got := perRound; got[0] != 0 || got[1] != 1 || got[2] != 1 || got[3] != 0 {
		t.Fatalf("progress reports per round %v, want [0 1 1 0]", got)
	}
}

func TestSetProfileFinishesWhenTheNodeReportsIt(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	// The change is accepted but the node restarts before it reports the profile.
	var accepted atomic.Bool
	f.Hook = func(ctx context.Context, c fake.Call) error {
		if c.Kind == "set-profile" {
			accepted.Store(true)
			return errors.New("stop here: the node reports the profile later")
		}
		return nil
	}
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	op := operator.NewSetProfile("test", c.Now, c.Range(2), 4, "scan", "n4 serves scans")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(f.Snapshot())
	if !accepted.Load() {
		t.Fatal("SetProfile was not called")
	}
	if e.Busy(2) {
		t.Fatal("a failed call with the profile not reported should end the operator")
	}
	if en := entry(t, e, op.ID); !strings.HasPrefix(en.Status, decisions.StatusFailed) {
		t.Fatalf("status %q, want failed", en.Status)
	}

	// Accepted: the operator runs until the node reports the profile, then succeeds.
	f.Hook = nil
	op = operator.NewSetProfile("test", c.Now, c.Range(2), 4, "scan", "n4 serves scans")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(f.Snapshot())
	e.Reconcile(f.Snapshot())
	if e.Busy(2) {
		t.Fatalf("operator still running with n4 reporting scan: %+v", e.Statuses())
	}
	if en := entry(t, e, op.ID); en.Status != decisions.StatusSucceeded {
		t.Fatalf("status %q, want succeeded", en.Status)
	}
	if n := f.Snapshot().Node(4); n.Profile != "scan" {
		t.Fatalf("n4 runs %q", n.Profile)
	}
}
