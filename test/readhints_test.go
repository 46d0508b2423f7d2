package test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/readhints"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/test/testcluster"
)

// cacheCounters reads node i's cumulative block-cache lookups.
func cacheCounters(c *testcluster.Cluster, i int) (hits, misses int64) {
	st := c.Nodes[i].Eng.Stats()
	return st.BlockCacheHits, st.BlockCacheMisses
}

// hitRatio is the hit ratio of the lookups between two readings (NaN without lookups).
func hitRatio(h0, m0, h1, m1 int64) (float64, int64) {
	n := (h1 - h0) + (m1 - m0)
	if n == 0 {
		return math.NaN(), 0
	}
	return float64(h1-h0) / float64(n), n
}

// readLoop reads keys over and over through the leader (linearizable reads) until ctx ends.
func readLoop(ctx context.Context, cl *client.Client, keys [][]byte) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				_, _, _ = cl.Get(ctx, keys[i%len(keys)])
			}
		}(w)
	}
	return &wg
}

// loadAndCompact writes n keys of about 200 bytes and compacts every node's engine, so that the data
// sits in tables that no read has touched yet (cold block caches everywhere).
func loadAndCompact(t *testing.T, ctx context.Context, c *testcluster.Cluster, cl *client.Client, n int) {
	t.Helper()
	value := []byte(strings.Repeat("v", 200))
	for first := 0; first < n; first += 100 {
		var muts []*pb.Mutation
		for i := first; i < min(first+100, n); i++ {
			muts = append(muts, &pb.Mutation{Key: []byte(fmt.Sprintf("hk%06d", i)), Value: value})
		}
		if err := cl.WriteMany(ctx, muts); err != nil {
			t.Fatal(err)
		}
	}
	testcluster.WaitFor(t, 30*time.Second, "every replica applied the load", func() bool {
		for i := range c.Nodes {
			r := c.LocalReplica(i, []byte(fmt.Sprintf("hk%06d", n-1)))
			if r == nil {
				return false
			}
			if _, found, err := r.Get([]byte(fmt.Sprintf("hk%06d", n-1))); err != nil || !found {
				return false
			}
		}
		return true
	})
	for i := range c.Nodes {
		if err := c.Nodes[i].Eng.CompactAll(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// hotKeys is every stride-th of n keys (scattered over the key space: one data block each).
func hotKeys(n, count int) [][]byte {
	var out [][]byte
	for i := 0; i < count; i++ {
		out = append(out, []byte(fmt.Sprintf("hk%06d", i*(n/count))))
	}
	return out
}

// hotRange starts the usual preamble of these tests on c: three voters everywhere, the policies that
// would move ranges or leaderships (and any extra ones) switched off, records keys loaded and
// compacted, and the range holding the first of hotN evenly spread hot keys. The context ends with
// the test.
func hotRange(t *testing.T, c *testcluster.Cluster, records, hotN int, off ...string) (context.Context, *client.Client, [][]byte, *pb.RangeStatus) {
	t.Helper()
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	testcluster.SwitchOff(t, ctx, cl, append([]string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit}, off...)...)
	loadAndCompact(t, ctx, c, cl, records)
	hot := hotKeys(records, hotN)
	rs, err := testcluster.RangeOf(ctx, cl, hot[0])
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cl, hot, rs
}

// TestReadHintsWarmFollowerCache: a follower that serves no reads gets its block cache warm on the
// leader's hot keys only through read hints. With the read_hints switch off it sees no lookups at
// all while the leader serves the hot set; switched on, its first replays of the hot set miss on
// the data blocks, and the later ones hit.
func TestReadHintsWarmFollowerCache(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Hints: readhints.Config{FixedFraction: true}, // the shared test machine's CPU must not pause replays
	}})
	// Little data: Pebble reserves its memtables' size out of the block cache, and the harness's
	// memtables (32 MiB at most, doubling from 256 KiB at each rotation) would outgrow its 16 MiB
	// cache after a few more megabytes of writes.
	const records = 5000
	ctx, cl, hot, rs := hotRange(t, c, records, 200, policy.NameReadHints)
	rangeID, leader := rs.GetDesc().GetRangeId(), c.NodeIndex(rs.LeaderNodeId)
	follower := (leader + 1) % 3
	fm := c.Nodes[follower].Node.Hints()
	if fm == nil {
		t.Fatal("the follower has no hints module (hints are on by default)")
	}
	testcluster.WaitFor(t, 10*time.Second, "every node sees read_hints off", func() bool {
		for _, n := range c.Nodes {
			if n.Node.HintsOn() {
				return false
			}
		}
		return true
	})

	// Switched off: the leader serves the hot set, the follower's cache sees nothing of it.
	rctx, stopReads := context.WithCancel(ctx)
	wg := readLoop(rctx, cl, hot)
	h0, m0 := cacheCounters(c, follower)
	received0 := fm.Metrics().Received
	time.Sleep(2 * time.Second)
	h1, m1 := cacheCounters(c, follower)
	if _, lookups := hitRatio(h0, m0, h1, m1); lookups > 100 || fm.Metrics().Received != received0 {
		t.Fatalf("read_hints off: the follower made %d block-cache lookups and received %d hints, want none", lookups, fm.Metrics().Received-received0)
	}

	// Switched on: the follower replays the hot set; the first pass misses, the later ones hit.
	if err := cl.SetPolicy(ctx, policy.NameReadHints, true); err != nil {
		t.Fatal(err)
	}
	h1, m1 = cacheCounters(c, follower)
	applied0 := fm.Metrics().Applied
	testcluster.WaitFor(t, 30*time.Second, "the follower replays the hot set once", func() bool {
		return fm.Metrics().Applied >= applied0+uint64(len(hot))
	})
	h2, m2 := cacheCounters(c, follower)
	mid := fm.Metrics()
	time.Sleep(3 * time.Second)
	h3, m3 := cacheCounters(c, follower)
	late := fm.Metrics()
	// Warmth covers the last few batches, which can still hold the first pass's misses when the
	// leader ships few large batches; with the reads going on, the window slides past them.
	warm := fm.Warmth(rangeID)
	for deadline := time.Now().Add(20 * time.Second); !(warm.Known && warm.HitRatio >= 0.95); warm = fm.Warmth(rangeID) {
		if time.Now().After(deadline) {
			t.Fatalf("warmth %v after 20 s more of reads: want known with a hit ratio ≥ 0.95", warm)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopReads()
	wg.Wait()

	early, earlyN := hitRatio(h1, m1, h2, m2)
	after, afterN := hitRatio(h2, m2, h3, m3)
	replayLate := float64(late.ReplayCacheHit-mid.ReplayCacheHit) / float64(late.ReplayCacheHit-mid.ReplayCacheHit+late.ReplayCacheMiss-mid.ReplayCacheMiss)
	t.Logf("follower n%d of r%d: block-cache hit ratio %.3f over %d lookups during the first pass of hints, %.3f over %d after; "+
		"replay bytes hit ratio after %.3f; %d hints applied, %d received, %d bytes received, apply lag %v; warmth %v",
		c.Nodes[follower].Node.NodeID(), rangeID, early, earlyN, after, afterN, replayLate, late.Applied, late.Received,
		late.BytesReceived, late.ApplyLag, warm)
	if afterN < 200 {
		t.Fatalf("only %d block-cache lookups on the follower after the first pass: hints stopped flowing", afterN)
	}
	if earlyMisses := m2 - m1; earlyMisses < int64(len(hot)/4) {
		t.Fatalf("only %d block-cache misses on the follower during the first pass of %d cold hot keys: was its cache warm already?", earlyMisses, len(hot))
	}
	if !(after >= 0.95) || !(after > early) {
		t.Fatalf("follower hit ratio %.3f during the first pass, %.3f after: want ≥ 0.95 after and a clear rise", early, after)
	}
	if !(replayLate >= 0.95) {
		t.Fatalf("replays' block bytes found in the cache after the first pass: %.3f, want ≥ 0.95", replayLate)
	}
}

// transferNotes returns the notes of the autopilot's finished transfer-leader decisions on rangeID
// with ids above after, and the largest id of the finished decisions looked at.
func transferNotes(ctx context.Context, cl *client.Client, rangeID, after uint64) ([]string, uint64, error) {
	_, raw, err := cl.Decisions(ctx)
	if err != nil {
		return nil, after, err
	}
	var entries []struct {
		ID       uint64   `json:"id"`
		Range    uint64   `json:"range"`
		Operator string   `json:"operator"`
		Status   string   `json:"status"`
		Notes    []string `json:"notes"`
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, after, err
	}
	var notes []string
	last := after
	for _, e := range entries {
		if e.ID <= after || e.Status == "running" {
			continue // a running entry is looked at again next time
		}
		last = max(last, e.ID)
		if e.Range == rangeID && strings.Contains(e.Operator, "transfer-leader") {
			notes = append(notes, e.Notes...)
		}
	}
	return notes, last, nil
}

// TestWarmBeforeTransfer: the autopilot's leadership transfers (a drain here) first ask the target
// for its warmth. A target that replays the leader's hints is warm at once, and the decision log
// says so; a target that applies none of them (fraction 0) is not warm, and the transfer happens
// anyway once the bounded wait (1 s here) is over, with that in the log.
func TestWarmBeforeTransfer(t *testing.T) {
	const wait = time.Second
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Hints:     readhints.Config{FixedFraction: true, TransferWait: wait},
		Autopilot: autopilot.Config{Interval: 200 * time.Millisecond},
	}})
	ctx, cl, hot, rs := hotRange(t, c, 5000, 100)
	rangeID := rs.GetDesc().GetRangeId()
	// The user range is led from node 2 so that draining it leaves the meta range (and the
	// autopilot, which keeps the decision log) where it is.
	const serving = 1 // index of node 2
	servingID := c.Nodes[serving].Node.NodeID()
	if err := cl.TransferLeader(ctx, rangeID, servingID); err != nil {
		t.Fatal(err)
	}
	rctx, stopReads := context.WithCancel(ctx)
	wg := readLoop(rctx, cl, hot)
	defer func() {
		stopReads()
		wg.Wait()
	}()
	_, lastID, err := transferNotes(ctx, cl, rangeID, 0)
	if err != nil {
		t.Fatal(err)
	}
	warmOthers := func() {
		testcluster.WaitFor(t, 30*time.Second, "the other nodes warm for the range", func() bool {
			for i, n := range c.Nodes {
				if i == serving {
					continue
				}
				if w := n.Node.Hints().Warmth(rangeID); !w.Known || w.Replays < 16 || w.HitRatio < 0.95 {
					return false
				}
			}
			return true
		})
	}
	drain := func() (time.Duration, []string) {
		t.Helper()
		start := time.Now()
		if err := cl.SetNodeState(ctx, servingID, pb.NodeAdminState_NODE_DRAINING); err != nil {
			t.Fatal(err)
		}
		var notes []string
		deadline := time.Now().Add(30 * time.Second)
		for {
			notes, lastID, err = transferNotes(ctx, cl, rangeID, lastID)
			if err == nil && len(notes) > 0 {
				break
			}
			if time.Now().After(deadline) {
				_, raw, _ := cl.Decisions(ctx)
				t.Fatalf("no transfer of r%d in the decision log 30s after draining n%d (%v): %s", rangeID, servingID, err, raw)
			}
			time.Sleep(100 * time.Millisecond)
		}
		took := time.Since(start)
		if err := cl.SetNodeState(ctx, servingID, pb.NodeAdminState_NODE_ACTIVE); err != nil {
			t.Fatal(err)
		}
		if l := c.LocalReplica(serving, hot[0]); l != nil && l.IsLeader() {
			t.Fatalf("node %d still leads r%d after the drain's transfer", servingID, rangeID)
		}
		return took, notes
	}

	// 1. Both other nodes replay the hints: the transfer finds its target warm.
	warmOthers()
	took, notes := drain()
	t.Logf("warm target: transfer logged %v after the drain: %q", took.Round(time.Millisecond), notes)
	if len(notes) != 1 || !strings.Contains(notes[0], " warm after ") {
		t.Fatalf("notes %q: want one saying the target was warm", notes)
	}

	// 2. Give the leadership back to node 2 (once the autopilot no longer sees it draining); the
	// others now drop every hint (fraction 0), so their warmth goes stale: the transfer waits the
	// bounded time, then happens anyway.
	testcluster.WaitFor(t, 30*time.Second, "node 2 leads again, undrained", func() bool {
		if err := cl.TransferLeader(ctx, rangeID, servingID); err != nil {
			return false
		}
		time.Sleep(2 * time.Second) // a drain still in force would move it away again
		l := c.LocalReplica(serving, hot[0])
		return l != nil && l.IsLeader()
	})
	_, lastID, err = transferNotes(ctx, cl, rangeID, lastID)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if i != serving {
			n.Node.Hints().SetFraction(0)
		}
	}
	time.Sleep(2 * time.Second) // the last replays leave the warmth window (8 batches of 90 ms)
	took, notes = drain()
	t.Logf("cold target: transfer logged %v after the drain: %q", took.Round(time.Millisecond), notes)
	if len(notes) != 1 || !strings.Contains(notes[0], "not warm after") || !strings.Contains(notes[0], "transferred anyway") {
		t.Fatalf("notes %q: want one saying the target was not warm and the transfer happened anyway", notes)
	}
	if took < wait {
		t.Fatalf("transfer logged %v after the drain, before the %v wait ended", took, wait)
	}
}

// TestWarmAfterRestart: a follower that restarts replays its peers' hot-key summary before its raft
// groups start, so it comes back with the hot set in its cache instead of empty.
func TestWarmAfterRestart(t *testing.T) {
	// The warm-up's bound is generous here: what is checked is that the restarted node replays a
	// peer's hot keys, and under -race on a busy host one range's share of the default 2 s (500 ms)
	// did not cover dialing a peer and replaying its summary.
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Hints: readhints.Config{FixedFraction: true, RestartWarm: 20 * time.Second},
	}})
	ctx, cl, hot, rs := hotRange(t, c, 5000, 100)
	rangeID, leader := rs.GetDesc().GetRangeId(), c.NodeIndex(rs.LeaderNodeId)
	follower := (leader + 1) % 3
	rctx, stopReads := context.WithCancel(ctx)
	wg := readLoop(rctx, cl, hot)
	defer func() {
		stopReads()
		wg.Wait()
	}()
	testcluster.WaitFor(t, 30*time.Second, "the leader's hot-key summary holds the hot set", func() bool {
		return len(c.Nodes[leader].Node.Hints().HotKeys(rangeID, 0)) >= len(hot)*9/10
	})
	if err := c.KillWait(follower); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Restart(follower)
	took := time.Since(start)
	m := c.Nodes[follower].Node.Hints().Metrics()
	w := c.Nodes[follower].Node.Hints().Warmth(rangeID)
	t.Logf("restart of n%d took %v; right after it: %d hints applied, %d received; warmth %v", c.Nodes[follower].Node.NodeID(),
		took.Round(time.Millisecond), m.Applied, m.Received, w)
	// The warm-up's replays count as applied hints of the range without adding replays to its
	// warmth window; hints received after the restart add both. So with no replays in the window,
	// every applied hint came from the warm-up; otherwise at least those beyond what was received.
	fromWarmUp := w.HintsApplied
	if w.Replays > 0 {
		fromWarmUp = m.Applied - min(m.Applied, m.Received)
	}
	if !w.Known || fromWarmUp < uint64(len(hot)*8/10) {
		t.Fatalf("after the restart: warmth %v, %d hints applied, %d received: want at least %d of the hot set replayed from a peer's hot keys",
			w, m.Applied, m.Received, len(hot)*8/10)
	}
}

// TestDrainOfTheAutopilotsNode: draining the node that leads the meta range (where the autopilot runs)
// moves its user range's leadership first, with the warmth the transfer saw (cold here: it waits its
// bounded time), and the meta range's last; the next autopilot's decision log still holds the user
// transfer's outcome. Before, both moved in one round, the autopilot stopped as the meta range left,
// and the transfer was restored as "stopped" with no outcome.
func TestDrainOfTheAutopilotsNode(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		Hints:     readhints.Config{FixedFraction: true, TransferWait: 2 * time.Second},
		Autopilot: autopilot.Config{Interval: 200 * time.Millisecond},
	}})
	ctx, cl, hot, rs := hotRange(t, c, 2000, 50)
	rangeID := rs.GetDesc().GetRangeId()
	metaLeader := func() int {
		for i, n := range c.Nodes {
			if r := n.Node.Store().Replica(replica.MetaRangeID); r != nil && r.IsLeader() {
				return i
			}
		}
		return -1
	}
	var serving int
	testcluster.WaitFor(t, 30*time.Second, "the meta range's leader leads the user range too", func() bool {
		serving = metaLeader()
		if serving < 0 {
			return false
		}
		// A refused or failed transfer is retried by the next poll; what counts is the outcome.
		_ = cl.TransferLeader(ctx, rangeID, c.Nodes[serving].Node.NodeID())
		l := c.LocalReplica(serving, hot[0])
		return l != nil && l.IsLeader() && metaLeader() == serving
	})
	servingID := c.Nodes[serving].Node.NodeID()
	_, lastID, err := transferNotes(ctx, cl, rangeID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Cold targets: the user range's transfer waits its full bounded time, so that a meta range
	// moved in the same round would take the autopilot away while it waits.
	for i, n := range c.Nodes {
		if i != serving {
			n.Node.Hints().SetFraction(0)
		}
	}
	if err := cl.SetNodeState(ctx, servingID, pb.NodeAdminState_NODE_DRAINING); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 30*time.Second, "the drained node leads neither range", func() bool {
		l := c.LocalReplica(serving, hot[0])
		return (l == nil || !l.IsLeader()) && metaLeader() != serving && metaLeader() >= 0
	})
	var notes []string
	testcluster.WaitFor(t, 30*time.Second, "the user range's transfer in the new autopilot's log", func() bool {
		notes, _, err = transferNotes(ctx, cl, rangeID, lastID)
		return err == nil && len(notes) > 0
	})
	_, raw, err := cl.Decisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		ID       uint64 `json:"id"`
		Range    uint64 `json:"range"`
		Operator string `json:"operator"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// Only the drain's: a rebalance transfer of the set-up may have been canceled when the
		// set-up switched rebalance off.
		if e.ID > lastID && e.Range == rangeID && strings.Contains(e.Operator, "transfer-leader") && e.Status != "succeeded" {
			t.Errorf("r%d's transfer ended %q, want succeeded", rangeID, e.Status)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "read hints: ") {
		t.Fatalf("r%d's transfer notes %q: want one with the warmth it saw", rangeID, notes)
	}
}
