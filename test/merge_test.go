package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// mergeAt merges the range holding key with its right neighbour, retrying while the outcome is
// unknown or the cluster asks for a retry. It returns the merged descriptor (or the one Lookup finds
// after an ambiguous attempt that did merge).
func mergeAt(ctx context.Context, cl *client.Client, key []byte, wantEnd []byte) (*pb.RangeDescriptor, error) {
	var last error
	for ctx.Err() == nil {
		d, err := cl.Merge(ctx, key)
		if err == nil {
			return d, nil
		}
		last = err
		if errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrInternal) {
			return nil, err
		}
		if lr, lerr := cl.Lookup(ctx, key); lerr == nil && bytes.Equal(lr.GetRange().GetEndKey(), wantEnd) {
			return lr.GetRange(), nil // an earlier, ambiguous attempt did it
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("merge at %q: %v (last error: %v)", key, ctx.Err(), last)
}

// TestMergeUnderConcurrentWritesLosesNothing splits the key space into four ranges, then merges
// them back one by one while writers keep writing, restarts a node, and checks that every
// acknowledged key is readable with its value, scans see exactly the written keys, the ranges are
// what the merges made, and no range is left frozen.
func TestMergeUnderConcurrentWritesLosesNothing(t *testing.T) {
	const (
		nKeys    = 1200
		nWriters = 6
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	val := func(i int) string { return fmt.Sprintf("v%d-of-%04d", seed%1000, i) }
	bounds := []string{"k0300", "k0600", "k0900"}
	for _, b := range bounds {
		if err := splitAt(ctx, cl, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range after the splits", func() bool { return c.FullyReplicated(cl, 3) })

	order := rand.New(rand.NewPCG(seed, 0)).Perm(nKeys)
	next := make(chan int, nKeys)
	for _, i := range order {
		next <- i
	}
	close(next)
	acked := make([]atomic.Bool, nKeys)
	ambiguous := make([]atomic.Bool, nKeys)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for w := 0; w < nWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				err := cl.Put(ctx, []byte(key(i)), []byte(val(i)))
				switch {
				case err == nil:
					acked[i].Store(true)
				case errors.Is(err, client.ErrAmbiguous) || errors.Is(err, client.ErrTimeout):
					ambiguous[i].Store(true)
				default:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	// Merge right to left while the writers run: [k0600,k0900)+[k0900,∞), then [k0300,k0600)+…, then the first.
	for i := len(bounds) - 1; i >= 0; i-- {
		left := []byte("k0000")
		if i > 0 {
			left = []byte(bounds[i-1])
		}
		d, err := mergeAt(ctx, cl, left, nil)
		if err != nil {
			t.Fatalf("merge at %s: %v", left, err)
		}
		if len(d.GetEndKey()) != 0 {
			t.Fatalf("merge at %s: merged range ends at %q, want +inf", left, d.GetEndKey())
		}
		t.Logf("merged: r%d [%q, +inf) generation %d", d.GetRangeId(), d.GetStartKey(), d.GetGeneration())
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d writes failed definitely (a merge must only cause retries); first: %v", n, firstErr.Load())
	}

	// Exactly one user range remains, on three voters, with nothing frozen.
	testcluster.WaitFor(t, 60*time.Second, "one user range, fully replicated", func() bool {
		rs, err := cl.UserRanges(ctx)
		return err == nil && len(rs) == 1 && len(rs[0].GetDesc().GetStartKey()) == 0 && len(rs[0].GetDesc().GetEndKey()) == 0 &&
			rs[0].GetDesc().GetMergingInto() == 0 && c.FullyReplicated(cl, 3)
	})
	// The merged state survives a restart of a follower and of the leader's node alike.
	for _, i := range []int{1, 0} {
		if err := c.KillWait(i); err != nil {
			t.Fatal(err)
		}
		if err := c.TryRestart(i); err != nil {
			t.Fatal(err)
		}
		testcluster.WaitFor(t, 60*time.Second, "cluster back after a restart", func() bool { return c.FullyReplicated(cl, 3) })
	}
	for i := 0; i < nKeys; i++ {
		v, found, err := cl.Get(ctx, []byte(key(i)))
		if err != nil {
			t.Fatalf("get %s: %v", key(i), err)
		}
		if acked[i].Load() && (!found || string(v) != val(i)) {
			t.Fatalf("acknowledged %s lost after merges: found=%v value=%q", key(i), found, v)
		}
		if found && string(v) != val(i) {
			t.Fatalf("%s has value %q, never written", key(i), v)
		}
	}
	kvs, err := cl.Scan(ctx, []byte("k"), []byte("l"), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, kv := range kvs {
		seen[string(kv.Key)] = true
	}
	for i := 0; i < nKeys; i++ {
		if acked[i].Load() && !seen[key(i)] {
			t.Fatalf("scan misses acknowledged %s", key(i))
		}
	}
	// Every node's local replica set agrees: one user range, its replica covering everything.
	for _, n := range c.Nodes {
		users := 0
		for _, r := range n.Node.Store().Replicas() {
			if d := r.Desc(); d != nil && !r.IsMeta() {
				users++
				if len(d.StartKey) != 0 || len(d.EndKey) != 0 {
					t.Errorf("node %d still has range %d [%q, %q)", n.Index+1, d.RangeId, d.StartKey, d.EndKey)
				}
			}
		}
		if users != 1 {
			t.Errorf("node %d has %d user replicas, want 1", n.Index+1, users)
		}
	}
}

// TestMergePreconditions checks the errors a user gets for merges that cannot happen.
func TestMergePreconditions(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cl.Merge(ctx, []byte("a")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("merging the last range: got %v, want ErrInvalidArgument", err)
	}
	if _, err := cl.Merge(ctx, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("merging at an empty key: got %v, want ErrInvalidArgument", err)
	}
	if err := splitAt(ctx, cl, []byte("m")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Put(ctx, []byte("z"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	d, err := mergeAt(ctx, cl, []byte("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetStartKey()) != 0 || len(d.GetEndKey()) != 0 {
		t.Fatalf("merged range is [%q, %q), want everything", d.GetStartKey(), d.GetEndKey())
	}
	if v, found, err := cl.Get(ctx, []byte("z")); err != nil || !found || string(v) != "1" {
		t.Fatalf("get z after merge: %q %v %v", v, found, err)
	}
}

// TestLinearizableUnderMerges runs the linearizability workload on three nodes while a nemesis
// splits the key space between the workload's keys, merges ranges back, transfers leaderships and
// drains a node (all leaderships off it, then back) — with the autopilot running.
func TestLinearizableUnderMerges(t *testing.T) {
	runLinearizable(t, 3, "merges", splitsAndMerges)
}

// splitsAndMerges is a nemesis of splits, merges, leadership transfers and drains.
func splitsAndMerges(e *nemesisEnv) (actions int, err error) {
	e.sleep(2 * time.Second)
	drained := uint64(0)
	for time.Now().Before(e.deadline.Add(-time.Second)) {
		key := []byte(e.keys[e.rng.IntN(len(e.keys))])
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		switch p := e.rng.IntN(10); {
		case p < 4:
			_, _, serr := e.admin.Split(ctx, key)
			e.logf("split at %s: %v", key, serr)
			actions++
		case p < 8:
			d, merr := e.admin.Merge(ctx, key)
			e.logf("merge at %s: r%d [%q, %q): %v", key, d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), merr)
			actions++
		case p < 9:
			rs, lerr := testcluster.RangeOf(ctx, e.admin, key)
			if lerr != nil || rs.GetLeaderNodeId() == 0 {
				break
			}
			to := uint64(e.rng.IntN(len(e.c.Nodes)) + 1)
			terr := e.admin.TransferLeader(ctx, rs.GetDesc().GetRangeId(), to)
			e.logf("transfer r%d to n%d: %v", rs.GetDesc().GetRangeId(), to, terr)
			actions++
		default:
			if drained == 0 {
				drained = uint64(e.rng.IntN(len(e.c.Nodes)) + 1)
				derr := e.admin.SetNodeState(ctx, drained, pb.NodeAdminState_NODE_DRAINING)
				e.logf("drain n%d: %v", drained, derr)
			} else {
				aerr := e.admin.SetNodeState(ctx, drained, pb.NodeAdminState_NODE_ACTIVE)
				e.logf("activate n%d: %v", drained, aerr)
				drained = 0
			}
			actions++
		}
		cancel()
		e.sleep(time.Duration(200+e.rng.IntN(500)) * time.Millisecond)
	}
	if drained != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if aerr := e.admin.SetNodeState(ctx, drained, pb.NodeAdminState_NODE_ACTIVE); aerr != nil {
			return actions, fmt.Errorf("activate n%d after the run: %w", drained, aerr)
		}
	}
	return actions, nil
}

// TestStuckMergeIsAborted freezes a range for a merge and never completes it (as if the coordinator
// died): the frozen range's leader aborts the merge through the left range and unfreezes it, and the
// keys it holds become writable again. Meanwhile writes to it are retried, not failed.
func TestStuckMergeIsAborted(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{KV: kv.Config{MergeAbortAfter: 2 * time.Second}}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := splitAt(ctx, cl, []byte("m")); err != nil {
		t.Fatal(err)
	}
	left, err := testcluster.RangeOf(ctx, cl, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	right, err := testcluster.RangeOf(ctx, cl, []byte("m"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Nodes[0].Node.RangeCommand(ctx, &pb.RangeCommandRequest{RangeId: right.GetDesc().GetRangeId(),
		Command: &pb.Command{Freeze: &pb.FreezeForMerge{LeftRangeId: left.GetDesc().GetRangeId(), Generation: right.GetDesc().GetGeneration()}}})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("freeze: %v %v", err, resp.GetError())
	}
	if resp.GetDesc().GetMergingInto() != left.GetDesc().GetRangeId() {
		t.Fatalf("frozen descriptor %v does not name the left range", resp.GetDesc())
	}
	// A write to the frozen range waits (retries) until the stuck merge is aborted, then succeeds.
	start := time.Now()
	if err := cl.Put(ctx, []byte("z"), []byte("after")); err != nil {
		t.Fatalf("write to the frozen range: %v", err)
	}
	t.Logf("write to the frozen range succeeded after %v", time.Since(start).Round(time.Millisecond))
	testcluster.WaitFor(t, 30*time.Second, "the right range unfrozen and the left one bumped", func() bool {
		r, err := testcluster.RangeOf(ctx, cl, []byte("m"))
		l, lerr := testcluster.RangeOf(ctx, cl, []byte("a"))
		return err == nil && lerr == nil && r.GetDesc().GetMergingInto() == 0 && r.GetDesc().GetRangeId() == right.GetDesc().GetRangeId() &&
			l.GetDesc().GetGeneration() > left.GetDesc().GetGeneration() && bytes.Equal(l.GetDesc().GetEndKey(), []byte("m"))
	})
	if v, found, err := cl.Get(ctx, []byte("z")); err != nil || !found || string(v) != "after" {
		t.Fatalf("get z = %q %v %v", v, found, err)
	}
	// The ranges still merge normally afterwards.
	if _, err := mergeAt(ctx, cl, []byte("a"), nil); err != nil {
		t.Fatalf("merge after the abort: %v", err)
	}
}
