package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/chaos/history"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/test/testcluster"
)

// The porcupine model of a key and the history recorder live in chaos/history, shared with the
// multi-process chaos suite. The short names below keep the other tests of this package unchanged.

type outcome = history.Outcome

const (
	outOK       = history.OutOK
	outDefinite = history.OutDefinite
	outUnknown  = history.OutUnknown
	outInvalid  = history.OutInvalid
)

func classify(err error) outcome { return history.Classify(err) }

// checkLinearizable runs porcupine over ops and fails t (with a visualization written to disk) unless
// the result is Ok.
func checkLinearizable(t *testing.T, ops []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	res, path, err := history.Check(ops, timeout, os.Getenv("SHOAL_TEST_ARTIFACTS"), t.Name())
	t.Logf("porcupine: %s on %d operations in %v", res, len(ops), time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	if err != nil {
		t.Logf("%v", err)
	} else {
		t.Logf("visualization of the history: %s", path)
	}
	if res == porcupine.Unknown {
		t.Fatalf("porcupine could not decide linearizability within %v (history too large?)", timeout)
	}
	t.Fatalf("history is NOT linearizable (see the visualization)")
}

// TestLinearizableUnderLeaderKills runs random gets, puts, compare-and-swaps and deletes on a few
// keys from several clients while a nemesis kills and restarts the leader of the user range, then
// checks the history (including a final read of every key) for linearizability.
func TestLinearizableUnderLeaderKills(t *testing.T) {
	runLinearizable(t, 3, "leader kills", killLeaders)
}

// nemesisEnv is what a nemesis gets: the cluster, an admin client, the workload's keys and clock.
type nemesisEnv struct {
	c        *testcluster.Cluster
	admin    *client.Client
	keys     []string
	deadline time.Time
	rng      *rand.Rand
	logf     func(format string, args ...any)
}

// sleep waits d, or less if the deadline comes first.
func (e *nemesisEnv) sleep(d time.Duration) {
	if rem := time.Until(e.deadline); rem < d {
		d = max(rem, 0)
	}
	time.Sleep(d)
}

// nemesisFunc disturbs the cluster until the deadline and reports how many disturbances it caused.
type nemesisFunc func(e *nemesisEnv) (actions int, err error)

// killLeaders kills the user range's leader, waits, restarts it, waits, and repeats.
func killLeaders(e *nemesisEnv) (kills int, err error) {
	c, admin, keys, deadline, rng, logf, sleep := e.c, e.admin, e.keys, e.deadline, e.rng, e.logf, e.sleep
	sleep(2 * time.Second)
	for time.Now().Before(deadline.Add(-time.Second)) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := testcluster.RangeOf(ctx, admin, []byte(keys[0]))
		cancel()
		if err != nil || rs.GetLeaderNodeId() == 0 {
			logf("no leader known for the user range (%v); retrying", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		idx := c.NodeIndex(rs.GetLeaderNodeId())
		if idx < 0 || !c.Alive(idx) {
			logf("leader n%d of r%d is not a live node; retrying", rs.GetLeaderNodeId(), rs.GetDesc().GetRangeId())
			time.Sleep(200 * time.Millisecond)
			continue
		}
		logf("kill n%d (leader of r%d)", idx+1, rs.GetDesc().GetRangeId())
		if err := c.KillWait(idx); err != nil {
			logf("kill n%d failed: %v", idx+1, err)
			return kills, err
		}
		kills++
		// Down for 1–3 s: long enough for a new election, short enough to come back often.
		time.Sleep(time.Second + time.Duration(rng.IntN(2000))*time.Millisecond)
		if err := c.TryRestart(idx); err != nil {
			logf("restart n%d failed: %v", idx+1, err)
			return kills, err
		}
		logf("restarted n%d", idx+1)
		sleep(1500*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond)
	}
	return kills, nil
}

// runLinearizable runs concurrent clients over a few keys on a cluster of nodes while nemesis
// disturbs it, then checks the whole history with porcupine. The workers' gets use reads.
func runLinearizable(t *testing.T, nodes int, what string, nemesis nemesisFunc, reads ...client.ReadOption) {
	const (
		nKeys     = 5
		nClients  = 6
		runFor    = 25 * time.Second
		opTimeout = 8 * time.Second
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	c := testcluster.StartSafe(t, testcluster.Options{Nodes: nodes})
	admin := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })

	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("lin/%d", i)
	}
	clients := make([]*client.Client, nClients)
	for i := range clients {
		clients[i] = c.NewClient(2*time.Second, 40)
	}
	h := history.New(nClients)
	deadline := time.Now().Add(runFor)

	var (
		wg       sync.WaitGroup
		badMu    sync.Mutex
		bad      []string
		stopping atomic.Bool
	)
	fail := func(format string, args ...any) {
		badMu.Lock()
		bad = append(bad, fmt.Sprintf(format, args...))
		badMu.Unlock()
	}

	for w := 0; w < nClients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			cl := clients[w]
			cid := w
			seq := 0
			// What this worker last saw of each key, to aim its compare-and-swaps.
			seen := make([]history.State, nKeys)
			for time.Now().Before(deadline) && !stopping.Load() {
				ki := rng.IntN(nKeys)
				key := keys[ki]
				seq++
				val := fmt.Sprintf("w%d.%d", w, seq)
				in := history.Input{Key: key}
				var out history.Output
				var err error
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				call := h.Now()
				switch p := rng.IntN(100); {
				case p < 40:
					in.Kind = history.Get
					var v []byte
					v, out.Found, err = cl.Get(ctx, []byte(key), reads...)
					out.Value = string(v)
					if err == nil {
						seen[ki] = history.State{Found: out.Found, Value: out.Value}
					}
				case p < 65:
					in.Kind, in.Value = history.Put, val
					err = cl.Put(ctx, []byte(key), []byte(val))
				case p < 93:
					in.Kind, in.Value = history.CAS, val
					guess := seen[ki]
					if rng.IntN(5) == 0 { // sometimes a deliberately wrong guess
						if rng.IntN(2) == 0 {
							guess = history.State{}
						} else {
							guess = history.State{Found: true, Value: fmt.Sprintf("w%d.%d", rng.IntN(nClients), rng.IntN(seq+1))}
						}
					}
					in.ExpectAbsent, in.Expected = !guess.Found, guess.Value
					var cur []byte
					out.Swapped, cur, out.Found, err = cl.CompareAndSwap(ctx, []byte(key), []byte(in.Expected), in.ExpectAbsent, []byte(val))
					if !out.Swapped {
						out.Value = string(cur)
					}
					if err == nil {
						if out.Swapped {
							seen[ki] = history.State{Found: true, Value: val}
						} else {
							seen[ki] = history.State{Found: out.Found, Value: out.Value}
						}
					}
				default:
					in.Kind = history.Delete
					out.Found, err = cl.Delete(ctx, []byte(key))
					if err == nil {
						seen[ki] = history.State{}
					}
				}
				ret := h.Now()
				cancel()
				if in.Kind == history.CAS && out.Swapped {
					// found/current are only meaningful when the swap failed.
					out.Found, out.Value = false, ""
				}
				pending, berr := h.Add(cid, in, out, call, ret, err)
				if berr != nil {
					fail("worker %d: %v", w, berr)
					return
				}
				if pending {
					cid = h.NewClientID()
				}
			}
		}(w)
	}

	// The nemesis runs until the deadline; the workers record every operation meanwhile.
	var (
		nemesisLog []string
		nemesisErr error
		kills      int
	)
	nemesisDone := make(chan struct{})
	go func() {
		defer close(nemesisDone)
		env := &nemesisEnv{c: c, admin: admin, keys: keys, deadline: deadline, rng: rand.New(rand.NewPCG(seed, 1000))}
		env.logf = func(format string, args ...any) {
			nemesisLog = append(nemesisLog, fmt.Sprintf("%6.2fs ", time.Duration(h.Now()).Seconds())+fmt.Sprintf(format, args...))
		}
		kills, nemesisErr = nemesis(env)
	}()

	<-nemesisDone
	if nemesisErr != nil {
		stopping.Store(true)
	}
	wg.Wait()
	for _, l := range nemesisLog {
		t.Log("nemesis: " + l)
	}
	if nemesisErr != nil {
		t.Fatalf("nemesis: %v", nemesisErr)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every node is up again: wait for the cluster to settle, then read every key linearizably. The
	// reads are part of the history, so the checker also verifies the final values.
	settled := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if settled = c.FullyReplicated(admin, 3); settled {
			break
		}
	}
	if !settled {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := admin.Ranges(ctx)
		cancel()
		for _, r := range rs {
			t.Logf("range %d: replicas %v leader n%d", r.Desc.RangeId, r.Desc.Replicas, r.LeaderNodeId)
		}
		t.Fatalf("timed out after 60s waiting for 3 voters and a leader on every range after the nemesis (ranges: %v)", err)
	}
	finalCID := h.NewClientID()
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		call := h.Now()
		v, found, err := admin.Get(ctx, []byte(key))
		ret := h.Now()
		cancel()
		if err != nil {
			t.Fatalf("final read of %s: %v", key, err)
		}
		h.Add(finalCID, history.Input{Kind: history.Get, Key: key}, history.Output{Found: found, Value: string(v)}, call, ret, nil)
		t.Logf("final %s = %s", key, history.State{Found: found, Value: string(v)})
	}

	ops := h.Finish()
	counts := h.Counts()
	var names []string
	for k := range counts {
		names = append(names, k)
	}
	sort.Strings(names)
	var summary []string
	for _, k := range names {
		summary = append(summary, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	t.Logf("%d %s; history of %d operations: %s", kills, what, len(ops), strings.Join(summary, " "))
	for _, s := range h.Internal() {
		t.Logf("INTERNAL error (treated as unknown outcome): %s", s)
	}
	if kills < 3 {
		t.Errorf("only %d %s happened; the test did not exercise the cluster enough", kills, what)
	}
	if counts["put ok"]+counts["cas ok"] < 100 {
		t.Errorf("only %d acknowledged writes; the cluster made too little progress", counts["put ok"]+counts["cas ok"])
	}
	checkLinearizable(t, ops, 60*time.Second)
}
