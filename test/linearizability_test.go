package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/test/testcluster"
)

// ---------------------------------------------------------------------------------------------
// A porcupine model of one key of the store, and the history recorded against it.
//
// Indeterminate writes (the client returned ErrAmbiguous/ErrTimeout/ErrInternal or a context error:
// the write may or may not have been applied) are recorded with Output.unknown and a Return time
// after every other event of the history, the documented way to model a crashed or timed-out call:
// the checker may then linearize the write anywhere after its call, including "never" (after the
// last observation). Definitely-failed ops (not proposed, per the client's contract) and failed reads
// are left out of the history: they had no effect and observed nothing.
// ---------------------------------------------------------------------------------------------

type kvOpKind uint8

const (
	opGet kvOpKind = iota
	opPut
	opCAS
	opDelete
)

type kvInput struct {
	kind         kvOpKind
	key          string
	value        string // put/cas: the new value
	expected     string // cas: the expected value (unless expectAbsent)
	expectAbsent bool   // cas: swap only if the key does not exist
}

type kvOutput struct {
	unknown bool   // write whose outcome is unknown
	found   bool   // get: key exists; cas: key exists (when not swapped); delete: key existed
	value   string // get: the value; cas: the current value (when not swapped)
	swapped bool   // cas
}

// kvState is the state of one key.
type kvState struct {
	found bool
	value string
}

func (in kvInput) String() string {
	switch in.kind {
	case opGet:
		return fmt.Sprintf("get(%s)", in.key)
	case opPut:
		return fmt.Sprintf("put(%s, %s)", in.key, in.value)
	case opCAS:
		if in.expectAbsent {
			return fmt.Sprintf("cas(%s, <absent> → %s)", in.key, in.value)
		}
		return fmt.Sprintf("cas(%s, %s → %s)", in.key, in.expected, in.value)
	default:
		return fmt.Sprintf("delete(%s)", in.key)
	}
}

func (s kvState) String() string {
	if !s.found {
		return "<absent>"
	}
	return s.value
}

func describeKVOp(input, output interface{}) string {
	in, out := input.(kvInput), output.(kvOutput)
	if out.unknown {
		return in.String() + " → ?"
	}
	switch in.kind {
	case opGet:
		return in.String() + " → " + kvState{out.found, out.value}.String()
	case opPut:
		return in.String() + " → ok"
	case opCAS:
		if out.swapped {
			return in.String() + " → swapped"
		}
		return in.String() + " → not swapped, current " + kvState{out.found, out.value}.String()
	default:
		return fmt.Sprintf("%s → found=%v", in, out.found)
	}
}

// kvModel is a register per key with get, put, compare-and-swap and delete, partitioned by key.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return kvState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		st, in, out := state.(kvState), input.(kvInput), output.(kvOutput)
		switch in.kind {
		case opGet:
			return out.found == st.found && (!st.found || out.value == st.value), st
		case opPut:
			return true, kvState{found: true, value: in.value}
		case opDelete:
			if out.unknown {
				return true, kvState{}
			}
			return out.found == st.found, kvState{}
		case opCAS:
			match := (in.expectAbsent && !st.found) || (!in.expectAbsent && st.found && st.value == in.expected)
			next := st
			if match {
				next = kvState{found: true, value: in.value}
			}
			if out.unknown {
				return true, next
			}
			if out.swapped {
				return match, next
			}
			return !match && out.found == st.found && (!st.found || out.value == st.value), st
		}
		return false, st
	},
	DescribeOperation: describeKVOp,
	DescribeState:     func(state interface{}) string { return state.(kvState).String() },
}

// history records operations from many goroutines.
type history struct {
	t0 time.Time

	mu       sync.Mutex
	ops      []porcupine.Operation
	unknown  []int // indexes in ops of writes with unknown outcome (Return fixed up in finish)
	nextCID  int
	counts   map[string]int
	internal []string
}

func newHistory(firstClientIDs int) *history {
	return &history{t0: time.Now(), nextCID: firstClientIDs, counts: map[string]int{}}
}

func (h *history) now() int64 { return int64(time.Since(h.t0)) }

// newClientID allocates a fresh porcupine client id: a goroutine whose write is left pending forever
// continues under a new id, so the visualization never shows one client with overlapping calls.
func (h *history) newClientID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextCID
	h.nextCID++
	return id
}

func (h *history) count(what string) {
	h.mu.Lock()
	h.counts[what]++
	h.mu.Unlock()
}

// outcome classifies a client error.
type outcome int

const (
	outOK       outcome = iota
	outDefinite         // the operation certainly had no effect
	outUnknown          // a write may or may not have been applied
	outInvalid          // the request was rejected as malformed: a test bug or a server bug
)

func classify(err error) outcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrNotLeader),
		errors.Is(err, client.ErrRangeMoved), errors.Is(err, client.ErrOverloaded):
		return outDefinite
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrUnauthenticated):
		return outInvalid
	default: // ErrAmbiguous, ErrTimeout, ErrInternal, context errors, anything unforeseen
		return outUnknown
	}
}

// add records a completed operation. It returns whether the calling goroutine must switch to a new
// client id (its operation stays pending forever).
func (h *history) add(cid int, in kvInput, out kvOutput, call, ret int64, err error) (pending bool, bad error) {
	kind := [...]string{"get", "put", "cas", "delete"}[in.kind]
	oc := classify(err)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch oc {
	case outOK:
		h.counts[kind+" ok"]++
		h.ops = append(h.ops, porcupine.Operation{ClientId: cid, Input: in, Call: call, Output: out, Return: ret})
		return false, nil
	case outDefinite:
		h.counts[kind+" failed (definite)"]++
		return false, nil
	case outInvalid:
		return false, fmt.Errorf("%s: unexpected invalid-argument error: %w", in, err)
	}
	if errors.Is(err, client.ErrInternal) {
		h.internal = append(h.internal, fmt.Sprintf("%s: %v", in, err))
	}
	if in.kind == opGet {
		h.counts["get failed"]++
		return false, nil
	}
	h.counts[kind+" unknown"]++
	h.unknown = append(h.unknown, len(h.ops))
	h.ops = append(h.ops, porcupine.Operation{ClientId: cid, Input: in, Call: call, Output: kvOutput{unknown: true}})
	return true, nil
}

// finish sets the return time of every pending write after the end of the history and returns it.
func (h *history) finish() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var end int64
	for _, op := range h.ops {
		end = max(end, op.Call, op.Return)
	}
	for _, i := range h.unknown {
		h.ops[i].Return = end + 1
	}
	return append([]porcupine.Operation(nil), h.ops...)
}

// checkLinearizable runs porcupine over ops and fails t (with a visualization written to disk) unless
// the result is Ok.
func checkLinearizable(t *testing.T, ops []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, ops, timeout)
	t.Logf("porcupine: %s on %d operations in %v", res, len(ops), time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	dir := os.Getenv("SHOAL_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir() // t.TempDir would be deleted at test end
	}
	path := filepath.Join(dir, fmt.Sprintf("shoal-linearizability-%s-%d.html", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
	if err := porcupine.VisualizePath(kvModel, info, path); err != nil {
		t.Logf("writing visualization: %v", err)
	} else {
		t.Logf("visualization of the history: %s", path)
	}
	if res == porcupine.Unknown {
		t.Fatalf("porcupine could not decide linearizability within %v (history too large?)", timeout)
	}
	t.Fatalf("history is NOT linearizable (see the visualization)")
}

// TestKVModelSanity guards the model itself: a stale read after an acknowledged write must be
// rejected, and a pending write may take effect or not.
func TestKVModelSanity(t *testing.T) {
	put := func(cid int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: kvInput{kind: opPut, key: "a", value: v}, Call: call, Output: kvOutput{}, Return: ret}
	}
	get := func(cid int, found bool, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: kvInput{kind: opGet, key: "a"}, Call: call, Output: kvOutput{found: found, value: v}, Return: ret}
	}
	pending := func(cid int, v string, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: kvInput{kind: opPut, key: "a", value: v}, Call: call, Output: kvOutput{unknown: true}, Return: 100}
	}
	cas := func(cid int, exp, v string, swapped bool, cur string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: kvInput{kind: opCAS, key: "a", expected: exp, value: v}, Call: call,
			Output: kvOutput{swapped: swapped, found: cur != "", value: cur}, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read own write", []porcupine.Operation{put(0, "x", 0, 1), get(0, true, "x", 2, 3)}, true},
		{"stale read", []porcupine.Operation{put(0, "x", 0, 1), put(0, "y", 2, 3), get(1, true, "x", 4, 5)}, false},
		{"read of absent after write", []porcupine.Operation{put(0, "x", 0, 1), get(1, false, "", 2, 3)}, false},
		{"pending write seen", []porcupine.Operation{pending(0, "x", 0), get(1, true, "x", 2, 3)}, true},
		{"pending write not seen", []porcupine.Operation{pending(0, "x", 0), get(1, false, "", 2, 3)}, true},
		{"pending write seen then lost", []porcupine.Operation{pending(0, "x", 0), get(1, true, "x", 2, 3), get(1, false, "", 4, 5)}, false},
		{"cas swaps", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "x", "y", true, "", 2, 3), get(0, true, "y", 4, 5)}, true},
		{"cas wrong current", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "z", "y", false, "q", 2, 3)}, false},
		{"cas swapped on mismatch", []porcupine.Operation{put(0, "x", 0, 1), cas(0, "z", "y", true, "", 2, 3)}, false},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperations(kvModel, tc.ops); got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
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
// disturbs it, then checks the whole history with porcupine.
func runLinearizable(t *testing.T, nodes int, what string, nemesis nemesisFunc) {
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
	h := newHistory(nClients)
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
			seen := make([]kvState, nKeys)
			for time.Now().Before(deadline) && !stopping.Load() {
				ki := rng.IntN(nKeys)
				key := keys[ki]
				seq++
				val := fmt.Sprintf("w%d.%d", w, seq)
				in := kvInput{key: key}
				var out kvOutput
				var err error
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				call := h.now()
				switch p := rng.IntN(100); {
				case p < 40:
					in.kind = opGet
					var v []byte
					v, out.found, err = cl.Get(ctx, []byte(key))
					out.value = string(v)
					if err == nil {
						seen[ki] = kvState{out.found, out.value}
					}
				case p < 65:
					in.kind, in.value = opPut, val
					err = cl.Put(ctx, []byte(key), []byte(val))
				case p < 93:
					in.kind, in.value = opCAS, val
					guess := seen[ki]
					if rng.IntN(5) == 0 { // sometimes a deliberately wrong guess
						if rng.IntN(2) == 0 {
							guess = kvState{}
						} else {
							guess = kvState{found: true, value: fmt.Sprintf("w%d.%d", rng.IntN(nClients), rng.IntN(seq+1))}
						}
					}
					in.expectAbsent, in.expected = !guess.found, guess.value
					var cur []byte
					out.swapped, cur, out.found, err = cl.CompareAndSwap(ctx, []byte(key), []byte(in.expected), in.expectAbsent, []byte(val))
					if !out.swapped {
						out.value = string(cur)
					}
					if err == nil {
						if out.swapped {
							seen[ki] = kvState{true, val}
						} else {
							seen[ki] = kvState{out.found, out.value}
						}
					}
				default:
					in.kind = opDelete
					out.found, err = cl.Delete(ctx, []byte(key))
					if err == nil {
						seen[ki] = kvState{}
					}
				}
				ret := h.now()
				cancel()
				if in.kind == opCAS && out.swapped {
					// found/current are only meaningful when the swap failed.
					out.found, out.value = false, ""
				}
				pending, berr := h.add(cid, in, out, call, ret, err)
				if berr != nil {
					fail("worker %d: %v", w, berr)
					return
				}
				if pending {
					cid = h.newClientID()
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
			nemesisLog = append(nemesisLog, fmt.Sprintf("%6.2fs ", time.Duration(h.now()).Seconds())+fmt.Sprintf(format, args...))
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
	finalCID := h.newClientID()
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		call := h.now()
		v, found, err := admin.Get(ctx, []byte(key))
		ret := h.now()
		cancel()
		if err != nil {
			t.Fatalf("final read of %s: %v", key, err)
		}
		h.add(finalCID, kvInput{kind: opGet, key: key}, kvOutput{found: found, value: string(v)}, call, ret, nil)
		t.Logf("final %s = %s", key, kvState{found, string(v)})
	}

	ops := h.finish()
	var names []string
	for k := range h.counts {
		names = append(names, k)
	}
	sort.Strings(names)
	var summary []string
	for _, k := range names {
		summary = append(summary, fmt.Sprintf("%s=%d", k, h.counts[k]))
	}
	t.Logf("%d %s; history of %d operations: %s", kills, what, len(ops), strings.Join(summary, " "))
	for _, s := range h.internal {
		t.Logf("INTERNAL error (treated as unknown outcome): %s", s)
	}
	if kills < 3 {
		t.Errorf("only %d %s happened; the test did not exercise the cluster enough", kills, what)
	}
	if h.counts["put ok"]+h.counts["cas ok"] < 100 {
		t.Errorf("only %d acknowledged writes; the cluster made too little progress", h.counts["put ok"]+h.counts["cas ok"])
	}
	checkLinearizable(t, ops, 60*time.Second)
}
