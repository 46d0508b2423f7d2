package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/internal/fake"
	"github.com/shoaldb/shoal/autopilot/operator"
)

func TestSnapshotRatesObserve(t *testing.T) {
	const max = 32 << 20
	for _, tc := range []struct {
		name          string
		start         float64 // the node's rate before; 0: never lowered
		bytes         uint64
		took, timeout time.Duration
		failed        bool
		want          float64
		wantNote      bool
	}{
		{"a timeout halves what the call showed", 0, 64 << 20, 20 * time.Second, 20 * time.Second, true, float64(64<<20) / 20 / 2, true},
		{"a timeout halves the rate when the call showed more", 1 << 20, 64 << 20, 20 * time.Second, 20 * time.Second, true, 1 << 19, true},
		{"never below the floor", 0, 1 << 20, time.Hour, time.Hour, true, MinSnapshotRate, true},
		{"an error well before the timeout is no timeout", 1 << 20, 64 << 20, time.Second, 20 * time.Second, true, 1 << 20, false},
		{"a success raises the rate to what it showed", 1 << 20, 64 << 20, 16 * time.Second, 20 * time.Second, false, 4 << 20, false},
		{"a success never lowers it", 8 << 20, 64 << 20, 16 * time.Second, 20 * time.Second, false, 8 << 20, false},
		{"nor raises it above the configured rate", 1 << 20, 64 << 20, time.Second, 20 * time.Second, false, max, false},
		{"an empty range teaches nothing", 1 << 20, 0, 16 * time.Second, 20 * time.Second, true, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapshotRates(max)
			if tc.start != 0 {
				s.rates[4] = tc.start
			}
			note := s.observe(4, tc.bytes, tc.took, tc.timeout, tc.failed)
			if got := s.rate(4); got != tc.want {
				t.Errorf("rate %.0f, want %.0f", got, tc.want)
			}
			if (note != "") != tc.wantNote {
				t.Errorf("note %q, want one: %v", note, tc.wantNote)
			}
			if s.rate(3) != max {
				t.Errorf("another node's rate %.0f, want the configured %d", s.rate(3), max)
			}
		})
	}
}

// TestTimedOutSnapshotGivesTheNextMoreTime: an add-learner that runs out of its time lowers the rate
// budgeted for snapshots into its node, says so in the decision log, and the next operator's
// add-learner and promotion onto that node get the longer timeouts.
func TestTimedOutSnapshotGivesTheNextMoreTime(t *testing.T) {
	f := fake.MustNew(t, fourNodes)
	f.Hook = func(ctx context.Context, c fake.Call) error {
		<-ctx.Done()
		return ctx.Err()
	}
	cfg := Config{Timeouts: operator.Timeouts{SnapshotRate: 32 << 20, Base: time.Second, Slack: 2}}
	e := New(f, f, nil, cfg)
	defer e.Stop()
	c := f.Snapshot()
	op := operator.NewAddReplica("test", c.Now, c.Range(2), 4, "slow snapshot")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	e.Reconcile(c)
	f.Advance(6 * time.Second) // past the add-learner's 5 s (64 MiB at 32 MiB/s, twice, plus 1 s)
	e.Reconcile(f.Snapshot())
	en := entry(t, e, op.ID)
	if !strings.Contains(strings.Join(en.Notes, "\n"), "snapshots into n4 budgeted at 5.33MiB/s") {
		t.Fatalf("status %q, notes %q: want the lowered rate (64 MiB in 6 s, halved)", en.Status, en.Notes)
	}
	c = f.Snapshot()
	r := c.Range(3)
	e.mu.Lock()
	add, promote := e.timeoutLocked(operator.AddLearner{Node: 4}, r), e.timeoutLocked(operator.PromoteVoter{Node: 4}, r)
	other := e.timeoutLocked(operator.AddLearner{Node: 3}, r)
	e.mu.Unlock()
	// 64 MiB at 5.33 MiB/s, twice, plus 1 s.
	if want := time.Second + 24*time.Second; (add-want).Abs() > time.Millisecond || (promote-want).Abs() > time.Millisecond {
		t.Errorf("onto n4: add-learner %v, promote %v; want %v each", add, promote, want)
	}
	if other != 5*time.Second {
		t.Errorf("onto n3: add-learner %v, want the configured rate's 5s", other)
	}
}
