package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/internal/fake"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// warmingCluster is the fake cluster plus an executor.Warmer that logs its calls next to the
// fake's own.
type warmingCluster struct {
	*fake.Cluster
	note string
	wait time.Duration

	mu    sync.Mutex
	order []string
}

func (w *warmingCluster) WarmBeforeTransfer(ctx context.Context, rangeID, to uint64, readQPS float64) string {
	w.mu.Lock()
	w.order = append(w.order, fmt.Sprintf("warm r%d n%d qps=%.0f", rangeID, to, readQPS))
	w.mu.Unlock()
	select {
	case <-time.After(w.wait):
	case <-ctx.Done():
	}
	return w.note
}

func (w *warmingCluster) TransferLeader(ctx context.Context, rangeID, to uint64) error {
	w.mu.Lock()
	w.order = append(w.order, fmt.Sprintf("transfer r%d n%d", rangeID, to))
	w.mu.Unlock()
	return w.Cluster.TransferLeader(ctx, rangeID, to)
}

func (w *warmingCluster) calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.order...)
}

func TestTransferAsksWarmerFirstAndLogsItsNote(t *testing.T) {
	f := &warmingCluster{Cluster: fake.MustNew(t, fourNodes), note: "read hints: n2 warm after 10ms"}
	f.UpdateRange(2, func(r *model.Range) *model.Range { r.ReadQPS = 250; return r })
	e := New(f, f, nil, Config{Inline: true})
	c := f.Snapshot()
	op := operator.NewTransferLeader("test", c.Now, c.Range(2), 2, "test transfer")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3 && e.Busy(2); i++ {
		e.Reconcile(f.Snapshot())
	}
	if got, want := strings.Join(f.calls(), "|"), "warm r2 n2 qps=250|transfer r2 n2"; got != want {
		t.Fatalf("calls %q, want %q (the warmth check comes first, then the transfer)", got, want)
	}
	en := entry(t, e, op.ID)
	if en.Status != decisions.StatusSucceeded || len(en.Notes) != 1 || en.Notes[0] != f.note {
		t.Fatalf("entry %+v: want succeeded with the warmer's note", en)
	}
	// A warmer with nothing to say leaves no note.
	f.note = ""
	c = f.Snapshot()
	op = operator.NewTransferLeader("test", c.Now, c.Range(3), 3, "test transfer")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3 && e.Busy(3); i++ {
		e.Reconcile(f.Snapshot())
	}
	if en := entry(t, e, op.ID); en.Status != decisions.StatusSucceeded || len(en.Notes) != 0 {
		t.Fatalf("entry %+v: want succeeded without notes", en)
	}
}

// A warmer that waits until the step's context ends (a target that never warms) still leads to the
// transfer: the step's own timeout bounds the wait, and the executor transfers afterwards.
func TestTransferFollowsAWarmerThatWaited(t *testing.T) {
	f := &warmingCluster{Cluster: fake.MustNew(t, fourNodes), note: "read hints: n3 not warm after 50ms; transferred anyway",
		wait: 50 * time.Millisecond}
	e := New(f, f, nil, Config{Interval: 10 * time.Millisecond})
	e.Start()
	defer e.Stop()
	c := f.Snapshot()
	op := operator.NewTransferLeader("test", c.Now, c.Range(4), 3, "test transfer")
	if err := e.Submit(op); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, "the transfer", func() bool { return !e.Busy(4) })
	if took := time.Since(start); took < f.wait {
		t.Fatalf("operator done after %v, before the warmer's %v wait", took, f.wait)
	}
	if got, want := strings.Join(f.calls(), "|"), "warm r4 n3 qps=0|transfer r4 n3"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if en := entry(t, e, op.ID); en.Status != decisions.StatusSucceeded || len(en.Notes) != 1 || en.Notes[0] != f.note {
		t.Fatalf("entry %+v: want succeeded with the not-warm note", en)
	}
}
