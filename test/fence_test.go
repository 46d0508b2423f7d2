package test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestSpanFenceHoldsWritesUntilLiftedAndRetiresSpans fences a span while a writer hammers it: no
// write applies after the fence's index, a write to the span waits (it is not refused) and goes
// through once the fence lifts, writes elsewhere are not held, a split keeps the fence on both
// sides, a fenced range does not merge, and a retired span refuses writes and reads with
// ErrSpanRetired.
func TestSpanFenceHoldsWritesUntilLiftedAndRetiresSpans(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	testcluster.Hold(t, ctx, cl)
	start, end := []byte("f/"), []byte("f0")
	if err := splitAt(ctx, cl, start); err != nil {
		t.Fatal(err)
	}
	if err := splitAt(ctx, cl, end); err != nil {
		t.Fatal(err)
	}

	// A writer that keeps writing one key of the span until the fence holds it.
	var writes atomic.Int64
	stopWriter := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stopWriter:
				writerDone <- nil
				return
			default:
			}
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.Put(wctx, []byte("f/w"), []byte("v"))
			wcancel()
			if err != nil {
				writerDone <- err
				return
			}
			writes.Add(1)
		}
	}()
	testcluster.WaitFor(t, 10*time.Second, "the writer writing", func() bool { return writes.Load() > 20 })
	idx, err := cl.FenceSpan(ctx, start, end, 7, false)
	if err != nil || len(idx) != 1 {
		t.Fatalf("fence: %v %v", idx, err)
	}
	var fenceIndex uint64
	for _, i := range idx {
		fenceIndex = i
	}
	time.Sleep(300 * time.Millisecond)
	held := writes.Load()
	e, _, err := cl.GetEntry(ctx, []byte("f/w"))
	if err != nil || e.ModIndex >= fenceIndex {
		t.Fatalf("f/w last written at index %d, the fence applied at %d (%v)", e.ModIndex, fenceIndex, err)
	}

	if err := cl.Put(ctx, []byte("g/outside"), []byte("x")); err != nil {
		t.Fatalf("a write outside the fence: %v", err)
	}
	if err := splitAt(ctx, cl, []byte("f/m")); err != nil {
		t.Fatalf("split inside the fence: %v", err)
	}
	if _, err := cl.Merge(ctx, start); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("merge of fenced ranges: %v, want ErrInvalidArgument", err)
	}
	late := make(chan error, 1)
	go func() { late <- cl.Put(ctx, []byte("f/z"), []byte("after the split")) }()
	select {
	case err := <-late:
		t.Fatalf("a write to the fenced right side returned (%v) before the fence lifted", err)
	case <-time.After(300 * time.Millisecond):
	}
	if w := writes.Load(); w != held {
		t.Fatalf("%d writes went through the fence", w-held)
	}
	if err := cl.LiftFence(ctx, start, end, 7); err != nil {
		t.Fatalf("lift: %v", err)
	}
	if err := <-late; err != nil {
		t.Fatalf("the held write after the lift: %v", err)
	}
	testcluster.WaitFor(t, 10*time.Second, "the writer going on", func() bool { return writes.Load() > held+5 })
	close(stopWriter)
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}

	if _, err := cl.FenceSpan(ctx, start, end, 8, true); err != nil {
		t.Fatalf("retire: %v", err)
	}
	if err := cl.Put(ctx, []byte("f/a"), []byte("x")); !errors.Is(err, client.ErrSpanRetired) {
		t.Fatalf("a write to a retired span: %v, want ErrSpanRetired", err)
	}
	if _, _, err := cl.Get(ctx, []byte("f/z")); !errors.Is(err, client.ErrSpanRetired) {
		t.Fatalf("a read of a retired span: %v, want ErrSpanRetired (its data is a stale copy)", err)
	}
	if err := cl.LiftFence(ctx, start, end, 8); err != nil {
		t.Fatal(err)
	}
	if v, found, err := cl.Get(ctx, []byte("f/z")); err != nil || !found || string(v) != "after the split" {
		t.Fatalf("a read after the retired fence lifted: %q %v %v", v, found, err)
	}
	if err := cl.Put(ctx, []byte("f/a"), []byte("x")); err != nil {
		t.Fatalf("a write after the retired fence lifted: %v", err)
	}
}
