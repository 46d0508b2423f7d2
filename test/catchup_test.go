package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/test/testcluster"
)

// raftTruncatedIndex reads the raft log truncation index of rangeID from node i's engine (the first
// 8 bytes, big-endian, of the truncated-state key, as replica/internal/raftlog/raftlog.go encodes it).
func raftTruncatedIndex(t *testing.T, c *testcluster.Cluster, i int, rangeID uint64) uint64 {
	t.Helper()
	v, found, err := c.Nodes[i].Eng.Get(storage.TruncatedStateKey(rangeID))
	if err != nil {
		t.Fatalf("n%d: read truncated state of r%d: %v", i+1, rangeID, err)
	}
	if !found {
		return 0
	}
	if len(v) < 8 {
		t.Fatalf("n%d: truncated state of r%d is %d bytes", i+1, rangeID, len(v))
	}
	return binary.BigEndian.Uint64(v[:8])
}

// TestRestartedNodeCatchesUp kills a follower, writes enough for the leader to truncate its raft log
// past the follower's position (so the follower can only catch up by snapshot), restarts it, waits for
// its local replica to hold everything, then kills another node and reads everything through the
// quorum that now depends on the restarted node.
func TestRestartedNodeCatchesUp(t *testing.T) {
	const (
		nKeys    = 6000 // each its own raft entry: more than the 4096-entry truncation threshold
		nWriters = 32
	)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	key := func(i int) []byte { return []byte(fmt.Sprintf("c%05d", i)) }
	val := func(i int) []byte { return []byte(fmt.Sprintf("v%d", i)) }
	if err := cl.Put(ctx, []byte("c-first"), []byte("x")); err != nil {
		t.Fatalf("put: %v", err)
	}

	rs, err := testcluster.RangeOf(ctx, cl, key(0))
	if err != nil {
		t.Fatal(err)
	}
	rangeID := rs.GetDesc().GetRangeId()
	leader := c.NodeIndex(rs.GetLeaderNodeId())
	follower := (leader + 1) % len(c.Nodes)
	fr := c.LocalReplica(follower, key(0))
	if fr == nil {
		t.Fatalf("n%d has no replica of r%d", follower+1, rangeID)
	}
	appliedAtKill := fr.Status().Applied
	t.Logf("r%d led by n%d; killing follower n%d at applied index %d", rangeID, leader+1, follower+1, appliedAtKill)
	if err := c.KillWait(follower); err != nil {
		t.Fatal(err)
	}

	// Write nKeys keys, one raft entry each. A write with an unknown outcome is simply repeated: a put
	// of the same value is idempotent.
	start := time.Now()
	next := make(chan int, nKeys)
	for i := 0; i < nKeys; i++ {
		next <- i
	}
	close(next)
	var (
		wg      sync.WaitGroup
		retries atomic.Int64
		errMu   sync.Mutex
		errs    []string
	)
	for w := 0; w < nWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
					err = cl.Put(pctx, key(i), val(i))
					pcancel()
					if err == nil || classify(err) == outInvalid {
						break
					}
					retries.Add(1)
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("put %s: %v", key(i), err))
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("wrote %d keys with n%d down in %v (%d retried attempts)", nKeys, follower+1, time.Since(start).Round(time.Millisecond), retries.Load())
	for j, e := range errs {
		if j == 10 {
			t.Errorf("... %d more", len(errs)-10)
			break
		}
		t.Error(e)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The live nodes must have truncated their logs past the follower's position, or the test would
	// not exercise snapshot catch-up.
	for i := range c.Nodes {
		if i == follower {
			continue
		}
		ti := raftTruncatedIndex(t, c, i, rangeID)
		t.Logf("n%d: r%d log truncated through index %d", i+1, rangeID, ti)
		if ti <= appliedAtKill {
			t.Fatalf("n%d truncated r%d only through %d, not past the follower's applied index %d: no snapshot needed, the test is void", i+1, rangeID, ti, appliedAtKill)
		}
	}

	restarted := time.Now()
	c.Restart(follower)
	last := key(nKeys - 1)
	testcluster.WaitFor(t, 90*time.Second, fmt.Sprintf("n%d's replica of r%d holds %s", follower+1, rangeID, last), func() bool {
		r := c.LocalReplica(follower, last)
		if r == nil {
			return false
		}
		v, found, err := r.Get(last)
		return err == nil && found && string(v) == string(val(nKeys-1))
	})
	t.Logf("n%d caught up in %v", follower+1, time.Since(restarted).Round(time.Millisecond))
	if ti := raftTruncatedIndex(t, c, follower, rangeID); ti <= appliedAtKill {
		t.Errorf("n%d's log of r%d starts at %d, not after its pre-kill applied index %d: it did not catch up by snapshot", follower+1, rangeID, ti, appliedAtKill)
	}
	// The local replica holds every key (read directly, without going through raft).
	fr = c.LocalReplica(follower, key(0))
	kvs, _, truncated, err := fr.Scan(key(0), key(nKeys), 0, 0, false)
	if err != nil || truncated || len(kvs) != nKeys {
		t.Fatalf("n%d local scan of r%d: %d keys, truncated=%v, err=%v; want %d", follower+1, rangeID, len(kvs), truncated, err, nKeys)
	}
	for i, kv := range kvs {
		if string(kv.GetKey()) != string(key(i)) || string(kv.GetValue()) != string(val(i)) {
			t.Fatalf("n%d local replica: entry %d is %q=%q, want %q=%q", follower+1, i, kv.GetKey(), kv.GetValue(), key(i), val(i))
		}
	}

	// Kill another node — the current leader of the range — so that every quorum includes the
	// restarted node, then read everything back and write once more.
	rs, err = testcluster.RangeOf(ctx, cl, key(0))
	if err != nil {
		t.Fatal(err)
	}
	victim := c.NodeIndex(rs.GetLeaderNodeId())
	if victim == follower || victim < 0 {
		victim = (follower + 1) % len(c.Nodes)
	}
	t.Logf("killing n%d; n%d and n%d remain", victim+1, follower+1, 3-victim-follower+1)
	if err := c.KillWait(victim); err != nil {
		t.Fatal(err)
	}
	got, err := cl.Scan(ctx, key(0), key(nKeys), 0, false)
	if err != nil {
		t.Fatalf("scan after killing n%d: %v", victim+1, err)
	}
	if len(got) != nKeys {
		t.Fatalf("scan after killing n%d returned %d keys, want %d", victim+1, len(got), nKeys)
	}
	for i, kv := range got {
		if string(kv.GetKey()) != string(key(i)) || string(kv.GetValue()) != string(val(i)) {
			t.Fatalf("scan after killing n%d: entry %d is %q=%q, want %q=%q", victim+1, i, kv.GetKey(), kv.GetValue(), key(i), val(i))
		}
	}
	for _, i := range []int{0, 1, nKeys / 2, nKeys - 1} {
		v, found, err := cl.Get(ctx, key(i))
		if err != nil || !found || string(v) != string(val(i)) {
			t.Errorf("get %s after killing n%d = %q, %v, %v", key(i), victim+1, v, found, err)
		}
	}
	if err := cl.Put(ctx, []byte("c-after"), []byte("y")); err != nil {
		t.Fatalf("put after killing n%d: %v", victim+1, err)
	}
	if v, found, err := cl.Get(ctx, []byte("c-after")); err != nil || !found || string(v) != "y" {
		t.Fatalf("get c-after = %q, %v, %v", v, found, err)
	}
}
