package test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/go-ycsb/pkg/generator"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/test/testcluster"
)

// zipfWorkload sends a rate-limited mix of gets and puts to keys drawn from YCSB's zipfian
// distribution (ordered keys: the most popular records have the lowest numbers, so the load is skewed
// towards the start of the key space) and counts, per key, the operations that completed.
type zipfWorkload struct {
	keys   [][]byte
	counts []atomic.Int64
	errs   atomic.Int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

// startZipfWorkload starts workers goroutines that together aim at rate operations per second over n
// keys (70 % gets, 30 % puts). Stop it with stopAndWait (also registered as a cleanup).
func startZipfWorkload(t *testing.T, cl *client.Client, n int, rate float64, workers int, seed int64) *zipfWorkload {
	w := &zipfWorkload{keys: make([][]byte, n), counts: make([]atomic.Int64, n), stop: make(chan struct{})}
	for i := range w.keys {
		w.keys[i] = []byte(fmt.Sprintf("zipf/%04d", i))
	}
	interval := time.Duration(float64(workers) / rate * float64(time.Second))
	for g := 0; g < workers; g++ {
		w.wg.Add(1)
		go func(g int) {
			defer w.wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(g)))
			// One generator per worker: go-ycsb's generators keep unsynchronized state.
			gen := generator.NewZipfianWithRange(0, int64(n-1), generator.ZipfianConstant)
			next := time.Now().Add(time.Duration(rng.Int63n(int64(interval))))
			for {
				select {
				case <-w.stop:
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(interval)
				if behind := time.Since(next); behind > time.Second {
					next = time.Now() // do not burst to catch up after a stall
				}
				i := gen.Next(rng)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var err error
				if rng.Intn(10) < 7 {
					_, _, err = cl.Get(ctx, w.keys[i])
				} else {
					err = cl.Put(ctx, w.keys[i], []byte(fmt.Sprintf("v%d", rng.Int63())))
				}
				cancel()
				if err != nil {
					w.errs.Add(1)
					continue
				}
				w.counts[i].Add(1)
			}
		}(g)
	}
	t.Cleanup(w.stopAndWait)
	return w
}

func (w *zipfWorkload) stopAndWait() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// snapshot returns the per-key counts of completed operations so far.
func (w *zipfWorkload) snapshot() []int64 {
	out := make([]int64, len(w.counts))
	for i := range w.counts {
		out[i] = w.counts[i].Load()
	}
	return out
}

// split returns the operations between two snapshots to keys below key and at or above it.
func (w *zipfWorkload) split(before, after []int64, key []byte) (left, right int64) {
	for i, k := range w.keys {
		d := after[i] - before[i]
		if bytes.Compare(k, key) < 0 {
			left += d
		} else {
			right += d
		}
	}
	return left, right
}

// leaderQPS returns the load (reads + writes per second) that the leader of rangeID reported in its
// last heartbeat, or -1 if no node reports leading it.
func leaderQPS(ctx context.Context, cl *client.Client, rangeID uint64) float64 {
	ns, err := cl.Nodes(ctx)
	if err != nil {
		return -1
	}
	for _, n := range ns {
		for _, rl := range n.GetStats().GetRanges() {
			if rl.GetRangeId() == rangeID && rl.GetLeader() {
				return rl.GetReadQps() + rl.GetWriteQps()
			}
		}
	}
	return -1
}

// decisionsBy returns the decisions of policy, oldest first.
func decisionsBy(ctx context.Context, cl *client.Client, name string) ([]client.Decision, error) {
	ds, _, err := cl.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	var out []client.Decision
	for _, d := range ds {
		if d.Policy == name {
			out = append(out, d)
		}
	}
	return out, nil
}

func formatDecisions(ds []client.Decision) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  %s %s r%d %s: %s (%s)", d.Time, d.Policy, d.Range, d.Status, d.Operator, d.Reason)
	}
	return b.String()
}

// setPolicy switches a policy, retrying transient errors (the autopilot's node may be changing).
func setPolicy(t *testing.T, cl *client.Client, name string, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		if err = cl.SetPolicy(ctx, name, on); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("set policy %s on=%v: %v", name, on, err)
}

// TestLoadSplitSplitsAZipfianHotRange drives a zipfian read/write load above the load_split threshold
// onto the only user range of a 3-node cluster. With load_split switched off the range is not split
// during a window of hot load; switched on, the autopilot splits it (a load_split decision, one more
// range) at a key that balances the workload's requests between the halves, and the rebalance policy
// then gives the two halves leaders on different nodes.
//
// The workload is rate-limited to between the threshold and twice it, so the halves are not hot enough
// to be split again. The balance of the halves is checked against a 30 % bound (the policy's unit tests
// check the search itself against 10 % on much longer request streams), measured by what the workload
// sent to each side over a window after the split.
func TestLoadSplitSplitsAZipfianHotRange(t *testing.T) {
	const (
		nKeys     = 1000
		threshold = 250.0 // ops/s; the default 2500 is beyond a -race cluster on a shared 2-core machine
		rate      = 450.0 // ops/s the workload aims at: hot, and each half (~225) below the threshold
		// Enough workers that each one's share of the rate (7 ops/s) allows ~140 ms an operation: on
		// a loaded -race host 24 workers (53 ms each) fell short of the threshold.
		workers = 64
		// off: no split during this much hot load; on: a split within it. The on side needs HotFor
		// (3 s) plus MinSamples and SettleSamples at the sampled rate, about 15–21 s under -race, and
		// 32 and 46 s on hosts so loaded that the workload's rate hovered at the threshold (median 274
		// and 327 ops/s, 116–684) and each dip restarted HotFor: the window leaves room for that, so
		// the comparison judges the policy, not the host's speed.
		window = 60 * time.Second
		maxImb = 0.30
	)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{
		HeartbeatInterval: 500 * time.Millisecond,
		Autopilot: autopilot.Config{
			Interval: 500 * time.Millisecond,
			Policies: policy.Config{LoadSplit: policy.LoadSplitConfig{
				QPSThreshold: threshold,
				HotFor:       3 * time.Second,
				// The defaults are tuned for thousands of sampled requests a second: MinSamples 16384
				// and SettleSamples 4096 would take a minute at this load, and with linear steps of
				// 1/512 of the band, averaged over 2048 estimates, the search needs ~10 k samples to
				// settle near the median of this distribution. Coarser linear steps and a shorter
				// average settle within ~2 k samples (a few % from the median, with occasional
				// excursions that MaxPredictedImbalance holds back).
				MinSamples:            3000,
				SettleSamples:         1500,
				MaxPredictedImbalance: 0.15,
				Search:                policy.SearchConfig{LinearDivisor: 64, AverageOver: 256},
			}},
		},
	}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	users, err := cl.UserRanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 {
		t.Fatalf("want one user range at the start, got %d", len(users))
	}
	hot := users[0].GetDesc().GetRangeId()

	// Phase 1: load_split off. The range is hot for the whole window and stays one range.
	setPolicy(t, cl, policy.NameLoadSplit, false)
	wl := startZipfWorkload(t, cl, nKeys, rate, workers, seed)
	testcluster.WaitFor(t, 15*time.Second, "the user range to report load above the threshold", func() bool {
		return leaderQPS(ctx, cl, hot) >= threshold
	})
	// As on the on side, time is counted in seconds the range was hot: the off phase lasts until the
	// range has been above the threshold for the whole window, however long a loaded host takes.
	var qs []float64
	offHot, offStart := 0, time.Now()
	for offHot < int(window/time.Second) {
		if time.Since(offStart) > 4*window {
			sort.Float64s(qs)
			t.Skipf("the machine is too slow: r%d was above %.0f ops/s for only %d s of %v (median %.0f)", hot, threshold,
				offHot, time.Since(offStart).Round(time.Second), qs[len(qs)/2])
		}
		time.Sleep(time.Second)
		q := leaderQPS(ctx, cl, hot)
		qs = append(qs, q)
		if q >= threshold {
			offHot++
		}
		if rs, err := cl.UserRanges(ctx); err == nil && len(rs) != 1 {
			t.Fatalf("with load_split off the hot range was split: %d user ranges", len(rs))
		}
	}
	sort.Float64s(qs)
	t.Logf("load_split off: r%d reported %.0f–%.0f ops/s (median %.0f), above the threshold for %d s of %v; workload errors %d",
		hot, qs[0], qs[len(qs)-1], qs[len(qs)/2], offHot, time.Since(offStart).Round(time.Second), wl.errs.Load())
	if ds, err := decisionsBy(ctx, cl, policy.NameLoadSplit); err != nil || len(ds) != 0 {
		t.Fatalf("load_split decisions while it was off (%v):%s", err, formatDecisions(ds))
	}
	if rs, err := cl.UserRanges(ctx); err != nil || len(rs) != 1 {
		t.Fatalf("with load_split off: %d user ranges (%v), want 1", len(rs), err)
	}

	// Phase 2: load_split on. The range is split within the same window.
	setPolicy(t, cl, policy.NameLoadSplit, true)
	on := time.Now()
	// Wait for a load_split decision whose split shows in the range descriptors.
	var (
		split    client.Decision
		splitKey []byte
		onQPS    []string
		all      []client.Decision
		polled   time.Time
		hotSecs  int // seconds since the switch in which the range reported load above the threshold
	)
	// Time is counted in seconds the range was hot: on a shared machine the workload sometimes falls
	// below the threshold for a while, and then no split is due.
	for splitKey == nil {
		if hotSecs > 2*int(window/time.Second) {
			t.Fatalf("no load_split split after %d hot seconds (%v since switching it on); r%d reported (ops/s, every second): %s; decisions:%s",
				hotSecs, time.Since(on).Round(time.Second), hot, strings.Join(onQPS, " "), formatDecisions(all))
		}
		if time.Since(on) > 6*window {
			t.Skipf("the machine is too slow: r%d was above %.0f ops/s for only %d of %v; ops/s: %s", hot, threshold, hotSecs,
				time.Since(on).Round(time.Second), strings.Join(onQPS, " "))
		}
		if time.Since(polled) >= time.Second {
			polled = time.Now()
			q := leaderQPS(ctx, cl, hot)
			if q >= threshold {
				hotSecs++
			}
			onQPS = append(onQPS, fmt.Sprintf("%.0f", q))
		}
		time.Sleep(200 * time.Millisecond)
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			continue
		}
		all = ds
		rs, err := cl.UserRanges(ctx)
		if err != nil || len(rs) < 2 {
			continue
		}
		for _, d := range ds {
			for _, r := range rs[1:] {
				if k := r.GetDesc().GetStartKey(); d.Policy == policy.NameLoadSplit && strings.Contains(d.Operator, fmt.Sprintf("at %q", k)) {
					split, splitKey = d, k
				}
			}
		}
	}
	took := time.Since(on)
	t.Logf("load_split on: r%d split at %q after %v (%d hot seconds): %s (%s)", split.Range, splitKey, took.Round(100*time.Millisecond), hotSecs, split.Operator, split.Reason)
	if hotSecs > int(window/time.Second) {
		t.Errorf("the split took %d hot seconds, longer than the %v window in which load_split off did not split", hotSecs, window)
	}
	// The decision should end "succeeded". The executor sometimes records "canceled: split at K: split
	// key K is no longer inside rN [S, K)" for a split that did happen: when a model snapshot shows the
	// split while the Split call is still in flight, Executor.advanceLocked does not skip the finished
	// step (it only skips when !rs.inflight) and runs Split.Check, which fails on a finished split. That
	// is an executor/decision-log bug, not a load_split one, so it is logged here rather than failed.
	testcluster.WaitFor(t, 15*time.Second, "the load_split decision to finish", func() bool {
		ds, _, err := cl.Decisions(ctx)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.ID == split.ID {
				split = d
			}
		}
		return split.Status != "running"
	})
	if split.Status != "succeeded" {
		t.Fatalf("the load_split decision for a split that happened ended %q, want succeeded", split.Status)
	}

	// The two halves carry similar load: count what the workload sent to each side.
	before := wl.snapshot()
	time.Sleep(5 * time.Second)
	left, right := wl.split(before, wl.snapshot(), splitKey)
	imb := imbalance(float64(left), float64(right))
	t.Logf("after the split, over 5s the workload sent %d ops left of %q and %d right of it: %.1f%% apart", left, splitKey, right, 100*imb)
	if left+right < 500 {
		t.Fatalf("only %d operations in 5s after the split: the workload made too little progress", left+right)
	}
	if imb > maxImb {
		t.Errorf("the halves' loads are %.1f%% apart, want at most %.0f%%", 100*imb, 100*maxImb)
	}

	// The rebalance policy gives the halves leaders on different nodes.
	var lastL, lastR *pb.RangeStatus
	testcluster.WaitFor(t, 30*time.Second, "the two halves led by different nodes", func() bool {
		rs, err := cl.UserRanges(ctx)
		if err != nil {
			return false
		}
		lastL, lastR = nil, nil
		for _, r := range rs {
			switch {
			case bytes.Equal(r.GetDesc().GetEndKey(), splitKey):
				lastL = r
			case bytes.Equal(r.GetDesc().GetStartKey(), splitKey):
				lastR = r
			}
		}
		return lastL != nil && lastR != nil && lastL.GetLeaderNodeId() != 0 && lastR.GetLeaderNodeId() != 0 &&
			lastL.GetLeaderNodeId() != lastR.GetLeaderNodeId()
	})
	t.Logf("halves: r%d [%q, %q) led by n%d (%.0f ops/s), r%d [%q, %q) led by n%d (%.0f ops/s)",
		lastL.GetDesc().GetRangeId(), lastL.GetDesc().GetStartKey(), lastL.GetDesc().GetEndKey(), lastL.GetLeaderNodeId(),
		leaderQPS(ctx, cl, lastL.GetDesc().GetRangeId()),
		lastR.GetDesc().GetRangeId(), lastR.GetDesc().GetStartKey(), lastR.GetDesc().GetEndKey(), lastR.GetLeaderNodeId(),
		leaderQPS(ctx, cl, lastR.GetDesc().GetRangeId()))
	if ds, _, err := cl.Decisions(ctx); err == nil {
		t.Logf("decisions:%s", formatDecisions(ds))
	}
	wl.stopAndWait()
	t.Logf("workload: %d errors", wl.errs.Load())
}

// imbalance is |a-b| / max(a, b) (0 when both are 0), as the autopilot measures it.
func imbalance(a, b float64) float64 {
	hi := max(a, b)
	if hi <= 0 {
		return 0
	}
	d := a - b
	if d < 0 {
		d = -d
	}
	return d / hi
}
