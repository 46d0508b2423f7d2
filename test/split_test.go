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
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// splitAt splits at key and retries until the cluster has a range starting at key: a split whose
// outcome is unknown is checked with Lookup, and one that failed definitely is tried again.
func splitAt(ctx context.Context, cl *client.Client, key []byte) error {
	var last error
	for ctx.Err() == nil {
		_, right, err := cl.Split(ctx, key)
		if err == nil {
			if !bytes.Equal(right.GetStartKey(), key) {
				return fmt.Errorf("split at %q returned right-hand range %v", key, right)
			}
			return nil
		}
		last = err
		if lr, lerr := cl.Lookup(ctx, key); lerr == nil && bytes.Equal(lr.GetRange().GetStartKey(), key) {
			return nil // an earlier, ambiguous attempt did it
		}
		if errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrInternal) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("split at %q: %v (last error: %v)", key, ctx.Err(), last)
}

// TestSplitUnderConcurrentWritesLosesNothing writes 2000 keys from several goroutines while the test
// splits the user range three times, then checks that every acknowledged key is readable, that
// forward and reverse scans of the whole space return exactly the acknowledged keys (plus possibly
// ones whose write was ambiguous, with their value), and that the ranges end up as expected.
func TestSplitUnderConcurrentWritesLosesNothing(t *testing.T) {
	const (
		nKeys    = 2000
		nWriters = 8
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })

	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	val := func(i int) string { return fmt.Sprintf("value-of-k%04d", i) }
	splits := []string{"k0500", "k1000", "k1500"}

	// Keys go out in a random order, so that every range being split sees writes during the split.
	order := rand.New(rand.NewPCG(seed, 0)).Perm(nKeys)
	next := make(chan int, nKeys)
	for _, i := range order {
		next <- i
	}
	close(next)

	const (
		stNone = iota
		stAcked
		stAmbiguous
		stFailed
	)
	status := make([]atomic.Int32, nKeys)
	var (
		done  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []string // every error, logged
		bad   []string // errors that fail the test
	)
	for w := 0; w < nWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := cl.Put(ctx, []byte(key(i)), []byte(val(i)))
				cancel()
				switch classify(err) {
				case outOK:
					status[i].Store(stAcked)
				case outDefinite:
					status[i].Store(stFailed)
				case outUnknown:
					status[i].Store(stAmbiguous)
				default:
					status[i].Store(stFailed)
					errMu.Lock()
					bad = append(bad, fmt.Sprintf("put %s: %v", key(i), err))
					errMu.Unlock()
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("put %s: %v", key(i), err))
					errMu.Unlock()
				}
				done.Add(1)
			}
		}()
	}

	// Split at 20%, 40% and 60% of the writes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var splitLog []string
	for si, sk := range splits {
		threshold := int64(nKeys * (si + 1) / 5)
		for done.Load() < threshold {
			time.Sleep(5 * time.Millisecond)
		}
		before := done.Load()
		start := time.Now()
		if err := splitAt(ctx, cl, []byte(sk)); err != nil {
			t.Errorf("split at %s: %v", sk, err)
		}
		splitLog = append(splitLog, fmt.Sprintf("split at %s in %v, %d..%d writes done", sk, time.Since(start).Round(time.Millisecond), before, done.Load()))
	}
	wg.Wait()
	for _, l := range splitLog {
		t.Log(l)
	}
	var acked, ambiguous, failed int
	for i := range status {
		switch status[i].Load() {
		case stAcked:
			acked++
		case stAmbiguous:
			ambiguous++
		case stFailed:
			failed++
		}
	}
	t.Logf("%d acknowledged, %d ambiguous, %d definitely failed", acked, ambiguous, failed)
	for _, e := range errs {
		t.Log(e)
	}
	for _, e := range bad {
		t.Error(e)
	}
	if acked < nKeys*9/10 {
		t.Errorf("only %d of %d writes acknowledged with no fault injected", acked, nKeys)
	}

	// Every acknowledged key is readable with its value.
	for i := 0; i < nKeys; i++ {
		if status[i].Load() != stAcked {
			continue
		}
		v, found, err := cl.Get(ctx, []byte(key(i)))
		if err != nil || !found || string(v) != val(i) {
			t.Errorf("get %s = %q, found=%v, err=%v; want %q", key(i), v, found, err, val(i))
		}
	}

	// Scans, forward and reverse, return exactly the acknowledged keys plus possibly ambiguous ones.
	checkScan := func(name string, kvs []*pb.KeyValue, reverse bool) {
		t.Helper()
		seen := make(map[string]bool)
		for j, kv := range kvs {
			k := string(kv.GetKey())
			if j > 0 {
				prev := kvs[j-1].GetKey()
				if c := bytes.Compare(prev, kv.GetKey()); (!reverse && c >= 0) || (reverse && c <= 0) {
					t.Errorf("%s: key %q at position %d out of order after %q", name, k, j, prev)
				}
			}
			seen[k] = true
			var i int
			if _, err := fmt.Sscanf(k, "k%04d", &i); err != nil || i < 0 || i >= nKeys || key(i) != k {
				t.Errorf("%s: unexpected key %q", name, k)
				continue
			}
			if string(kv.GetValue()) != val(i) {
				t.Errorf("%s: %s = %q, want %q", name, k, kv.GetValue(), val(i))
			}
			if st := status[i].Load(); st != stAcked && st != stAmbiguous {
				t.Errorf("%s: %s is present but its write failed definitely (status %d)", name, k, st)
			}
		}
		missing := 0
		for i := 0; i < nKeys; i++ {
			if status[i].Load() == stAcked && !seen[key(i)] {
				if missing < 10 {
					t.Errorf("%s: acknowledged key %s missing", name, key(i))
				}
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("%s: %d acknowledged keys missing of %d returned", name, missing, len(kvs))
		}
	}
	fwd, err := cl.Scan(ctx, nil, nil, 0, false)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	checkScan("forward scan", fwd, false)
	rev, err := cl.Scan(ctx, nil, nil, 0, true)
	if err != nil {
		t.Fatalf("reverse scan: %v", err)
	}
	checkScan("reverse scan", rev, true)
	if len(fwd) != len(rev) {
		t.Errorf("forward scan returned %d keys, reverse %d", len(fwd), len(rev))
	}
	// A scan that starts and ends inside different ranges, with a limit that stops it in a third.
	part, err := cl.Scan(ctx, []byte("k0400"), []byte("k1600"), 0, false)
	if err != nil {
		t.Fatalf("scan [k0400, k1600): %v", err)
	}
	wantPart := 0
	for _, kv := range fwd {
		if string(kv.GetKey()) >= "k0400" && string(kv.GetKey()) < "k1600" {
			wantPart++
		}
	}
	if len(part) != wantPart {
		t.Errorf("scan [k0400, k1600) returned %d keys, want %d", len(part), wantPart)
	}

	// The ranges: the user range was cut into four at the split keys, each with three voters.
	want := [][2]string{{"", "k0500"}, {"k0500", "k1000"}, {"k1000", "k1500"}, {"k1500", ""}}
	var (
		lastSeen []*pb.RangeStatus
		lastErr  error
		ok       bool
	)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !c.FullyReplicated(cl, 3) {
			continue
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
		lastSeen, lastErr = cl.UserRanges(rctx)
		rcancel()
		if lastErr != nil || len(lastSeen) != len(want) {
			continue
		}
		ok = true
		for j, r := range lastSeen {
			if string(r.GetDesc().GetStartKey()) != want[j][0] || string(r.GetDesc().GetEndKey()) != want[j][1] {
				ok = false
			}
		}
		if ok {
			break
		}
	}
	if !ok {
		for _, r := range lastSeen {
			t.Logf("range %s leader n%d", describeRange(r.GetDesc()), r.GetLeaderNodeId())
		}
		t.Fatalf("user ranges did not become %q, each with 3 voters and a leader, within 60s (last error %v)", want, lastErr)
	}
	// Every node's replica of every range holds exactly the data of the forward scan, once it has
	// applied everything.
	var diff string
	consistent := func() bool {
		for _, rs := range lastSeen {
			d := rs.GetDesc()
			var want []*pb.KeyValue
			for _, kv := range fwd {
				if bytes.Compare(kv.GetKey(), d.GetStartKey()) >= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(kv.GetKey(), d.GetEndKey()) < 0) {
					want = append(want, kv)
				}
			}
			for i := range c.Nodes {
				r := c.LocalReplica(i, d.GetStartKey())
				if r == nil || r.RangeID() != d.GetRangeId() {
					diff = fmt.Sprintf("n%d has no replica of r%d", i+1, d.GetRangeId())
					return false
				}
				got, _, truncated, err := r.Scan(d.GetStartKey(), d.GetEndKey(), 0, 0, false)
				if err != nil || truncated || len(got) != len(want) {
					diff = fmt.Sprintf("n%d's replica of r%d: %d keys (truncated=%v, err=%v), want %d", i+1, d.GetRangeId(), len(got), truncated, err, len(want))
					return false
				}
				for j := range got {
					if !bytes.Equal(got[j].GetKey(), want[j].GetKey()) || !bytes.Equal(got[j].GetValue(), want[j].GetValue()) {
						diff = fmt.Sprintf("n%d's replica of r%d: entry %d is %q=%q, want %q=%q", i+1, d.GetRangeId(), j, got[j].GetKey(), got[j].GetValue(), want[j].GetKey(), want[j].GetValue())
						return false
					}
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !consistent() {
		if time.Now().After(deadline) {
			t.Fatalf("replicas disagree after 30s: %s", diff)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ids := map[uint64]bool{}
	for _, r := range lastSeen {
		t.Logf("range %s leader n%d", describeRange(r.GetDesc()), r.GetLeaderNodeId())
		if ids[r.GetDesc().GetRangeId()] {
			t.Errorf("range id %d appears twice", r.GetDesc().GetRangeId())
		}
		ids[r.GetDesc().GetRangeId()] = true
	}
}

// describeRange renders a descriptor for logs: r7 ["a", "b") gen 3 voters [n1 n2 n3].
func describeRange(d *pb.RangeDescriptor) string {
	end := fmt.Sprintf("%q", d.GetEndKey())
	if len(d.GetEndKey()) == 0 {
		end = "+inf"
	}
	var reps []string
	for _, r := range d.GetReplicas() {
		s := fmt.Sprintf("n%d", r.GetNodeId())
		if r.GetLearner() {
			s += "(learner)"
		}
		reps = append(reps, s)
	}
	return fmt.Sprintf("r%d [%q, %s) gen %d replicas %v", d.GetRangeId(), d.GetStartKey(), end, d.GetGeneration(), reps)
}
