package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/expiry"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/test/testcluster"
)

// rawExpiredOnDisk counts the keys of ks that node i still stores (expired or not).
func storedOn(c *testcluster.Cluster, i int, ks [][]byte) int {
	n := 0
	for _, k := range ks {
		if _, found, err := c.Nodes[i].Eng.Get(storage.UserDataKey(k)); err == nil && found {
			n++
		}
	}
	return n
}

func putTTLs(t *testing.T, cl *client.Client, prefix string, n int, ttl time.Duration) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ks [][]byte
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "%s%04d", prefix, i)
		var err error
		if ttl == 0 {
			err = cl.Put(ctx, k, []byte("v"))
		} else {
			err = cl.PutTTL(ctx, k, []byte("v"), ttl)
		}
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

// readable counts the keys of ks a linearizable read finds.
func readable(t *testing.T, cl *client.Client, ks [][]byte) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := 0
	for _, k := range ks {
		_, found, err := cl.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			n++
		}
	}
	return n
}

// TestExpiryHiddenAcrossLeaderChangeAndRestart: with the sweeper off, expired keys stay on disk and
// no read shows them, on the leader that saw them expire, on a new leader and after every node
// restarted; keys without expiry (or a far one) stay.
func TestExpiryHiddenAcrossLeaderChangeAndRestart(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{Expiry: expiry.Config{Off: true}}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	const ttl = 3 * time.Second
	start := time.Now()
	short := putTTLs(t, cl, "exp/short/", 50, ttl)
	written := time.Now()
	long := putTTLs(t, cl, "exp/long/", 20, time.Hour)
	plain := putTTLs(t, cl, "exp/plain/", 20, 0)
	if n := readable(t, cl, short); time.Since(start) < ttl && n != len(short) {
		t.Fatalf("%d of %d keys readable before their expiry", n, len(short))
	}
	time.Sleep(time.Until(written.Add(ttl + 100*time.Millisecond)))
	check := func(when string) {
		t.Helper()
		if n := readable(t, cl, short); n != 0 {
			t.Fatalf("%s: %d expired keys readable", when, n)
		}
		if n := readable(t, cl, append(append([][]byte(nil), long...), plain...)); n != len(long)+len(plain) {
			t.Fatalf("%s: %d of %d live keys readable", when, n, len(long)+len(plain))
		}
	}
	check("after expiry")
	if n := storedOn(c, 0, short); n != len(short) {
		t.Fatalf("node 1 stores %d of the %d expired keys with the sweeper off", n, len(short))
	}
	// A new leader.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := testcluster.RangeOf(ctx, cl, short[0])
	if err != nil {
		t.Fatal(err)
	}
	old := rs.GetLeaderNodeId()
	for _, rd := range rs.GetDesc().GetReplicas() {
		if rd.NodeId != old {
			if err := cl.TransferLeader(ctx, rs.GetDesc().GetRangeId(), rd.NodeId); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	testcluster.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		rs, err := testcluster.RangeOf(ctx, cl, short[0])
		return err == nil && rs.GetLeaderNodeId() != 0 && rs.GetLeaderNodeId() != old
	})
	check("after a leader change")
	// Every node restarted, one at a time.
	for i := range c.Nodes {
		if err := c.KillWait(i); err != nil {
			t.Fatal(err)
		}
		if err := c.TryRestart(i); err != nil {
			t.Fatal(err)
		}
		testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	}
	check("after restarts")
}

// TestExpirySwept: the leaders' sweepers delete expired keys through raft, from every replica, and
// spare keys that were rewritten without expiry.
func TestExpirySwept(t *testing.T) {
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{Expiry: expiry.Config{Interval: 200 * time.Millisecond}}})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	short := putTTLs(t, cl, "sweep/short/", 300, 500*time.Millisecond)
	rewritten := putTTLs(t, cl, "sweep/re/", 20, 500*time.Millisecond)
	putTTLs(t, cl, "sweep/re/", 20, 0) // the same keys, now without expiry
	long := putTTLs(t, cl, "sweep/long/", 20, time.Hour)
	testcluster.WaitFor(t, 20*time.Second, "expired keys gone from every replica", func() bool {
		for i := range c.Nodes {
			if storedOn(c, i, short) != 0 {
				return false
			}
		}
		return true
	})
	for i := range c.Nodes {
		if n := storedOn(c, i, append(append([][]byte(nil), rewritten...), long...)); n != len(rewritten)+len(long) {
			t.Fatalf("node %d stores %d of %d live keys after the sweep", i+1, n, len(rewritten)+len(long))
		}
	}
	var deleted uint64
	for _, n := range c.Nodes {
		deleted += n.Node.ExpiryStats().Deleted
	}
	if deleted < uint64(len(short)) {
		t.Fatalf("sweepers report %d deletions, want at least %d", deleted, len(short))
	}
}

// TestExpiryBackupRoundTrip: a backup carries each key's expiry and a restore keeps it.
func TestExpiryBackupRoundTrip(t *testing.T) {
	src := testcluster.StartSafe(t, testcluster.Options{Nodes: 1})
	cl := src.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := putTTLs(t, cl, "bk/long/", 10, time.Hour)
	short := putTTLs(t, cl, "bk/short/", 10, 3*time.Second)
	plain := putTTLs(t, cl, "bk/plain/", 10, 0)
	want := map[string]int64{}
	for _, k := range append(append(append([][]byte(nil), long...), short...), plain...) {
		e, found, err := cl.GetEntry(ctx, k)
		if err != nil || !found {
			t.Fatalf("%s: %v %v", k, found, err)
		}
		want[string(k)] = e.ExpireAtMs
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if _, err := cl.Backup(ctx, src.Nodes[0].Node.NodeID(), dir, 0); err != nil {
		t.Fatal(err)
	}
	dst := testcluster.StartSafe(t, testcluster.Options{Nodes: 1})
	dcl := dst.Client()
	if _, res, err := dcl.Restore(ctx, dir, client.RestoreOptions{Verify: true}); err != nil || !res.Verified {
		t.Fatalf("restore: %+v %v", res, err)
	}
	for k, at := range want {
		e, found, err := dcl.GetEntry(ctx, []byte(k))
		if err == nil && !found && at != 0 && at <= time.Now().UnixMilli() {
			continue // expired since (a slow machine)
		}
		if err != nil || !found || e.ExpireAtMs != at {
			t.Fatalf("%s restored as %+v (found %v, %v); want expiry %d", k, e, found, err, at)
		}
	}
	// Each short key's three seconds run from its own put: wait for the last of them.
	var last int64
	for _, k := range short {
		last = max(last, want[string(k)])
	}
	time.Sleep(time.Until(time.UnixMilli(last + 100)))
	if n := readable(t, dcl, short); n != 0 {
		t.Fatalf("%d restored keys readable after their expiry", n)
	}
}

// A porcupine model of a key with time: a put may carry a ttl, measured from the leader's clock at a
// point between the put's call and return, so the model keeps the interval the expiry lies in. A
// read that finds the key must have happened before the expiry could have come; one that does not
// find a key it might still see narrows it; once a key is seen expired, no read may find it again
// (no resurrection).

type ttlInput struct {
	kind   string // get, put, delete
	key    string
	value  string
	ttlMs  int64
	callMs int64 // wall clock at the call
}

type ttlOutput struct {
	found   bool
	value   string
	retMs   int64 // wall clock at the return
	unknown bool
}

type ttlState struct {
	found  bool
	value  string
	lo, hi int64 // the expiry lies in [lo, hi]; 0, 0: none
}

var ttlModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(ttlInput).key
			by[k] = append(by[k], op)
		}
		keys := make([]string, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return ttlState{} },
	Step: func(s, i, o any) (bool, any) {
		st, in, out := s.(ttlState), i.(ttlInput), o.(ttlOutput)
		switch in.kind {
		case "put":
			next := ttlState{found: true, value: in.value}
			if in.ttlMs > 0 {
				hi := out.retMs
				if out.unknown {
					hi = 1 << 62
				}
				next.lo, next.hi = in.callMs+in.ttlMs, hi+in.ttlMs
			}
			return true, next
		case "delete":
			return true, ttlState{}
		}
		if !st.found {
			return !out.found, st
		}
		ttl := st.hi != 0
		if out.found {
			// Read before the expiry: possible only if the read began before the latest expiry.
			if out.value != st.value || ttl && in.callMs >= st.hi {
				return false, st
			}
			if ttl {
				st.lo = max(st.lo, in.callMs+1)
			}
			return true, st
		}
		// Not found: the key must have expired by the read's return, and stays expired.
		if !ttl || out.retMs < st.lo {
			return false, st
		}
		return true, ttlState{}
	},
	DescribeOperation: func(i, o any) string {
		in, out := i.(ttlInput), o.(ttlOutput)
		r := fmt.Sprintf("%s(%s", in.kind, in.key)
		if in.kind == "put" {
			r += fmt.Sprintf(", %s, ttl %dms", in.value, in.ttlMs)
		}
		if out.unknown {
			return r + ") → ?"
		}
		if in.kind == "get" {
			if !out.found {
				return r + ") → <absent>"
			}
			return r + ") → " + out.value
		}
		return r + ")"
	},
}

// TestExpiryLinearizable runs puts with and without ttls, gets and deletes on a few keys from several
// clients while the nemesis kills and restarts the range's leader, and checks the history against the
// model with time: no read returns an expired key, and no expired key comes back.
func TestExpiryLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 s run under leader kills")
	}
	const nKeys, nClients, runFor = 3, 4, 10 * time.Second
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	c := testcluster.StartSafe(t, testcluster.Options{Nodes: 3, Node: node.Config{Expiry: expiry.Config{Interval: 300 * time.Millisecond}}})
	admin := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(admin, 3) })
	keys := []string{"ttl/0", "ttl/1", "ttl/2"}[:nKeys]
	deadline := time.Now().Add(runFor)
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		wg  sync.WaitGroup
		t0  = time.Now()
	)
	now := func() int64 { return int64(time.Since(t0)) }
	for w := 0; w < nClients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			cl := c.NewClient(2*time.Second, 40)
			cid := w * 1000
			for seq := 0; time.Now().Before(deadline); seq++ {
				in := ttlInput{key: keys[rng.IntN(nKeys)], callMs: time.Now().UnixMilli()}
				var out ttlOutput
				var err error
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				call := now()
				switch p := rng.IntN(100); {
				case p < 55:
					in.kind = "get"
					var v []byte
					v, out.found, err = cl.Get(ctx, []byte(in.key))
					out.value = string(v)
				case p < 90:
					in.kind, in.value = "put", fmt.Sprintf("w%d.%d", w, seq)
					if rng.IntN(3) > 0 {
						in.ttlMs = 50 + rng.Int64N(600)
						err = cl.PutTTL(ctx, []byte(in.key), []byte(in.value), time.Duration(in.ttlMs)*time.Millisecond)
					} else {
						err = cl.Put(ctx, []byte(in.key), []byte(in.value))
					}
				default:
					in.kind = "delete"
					_, err = cl.Delete(ctx, []byte(in.key))
				}
				cancel()
				out.retMs = time.Now().UnixMilli()
				ret := now()
				switch classify(err) {
				case outOK:
					mu.Lock()
					ops = append(ops, porcupine.Operation{ClientId: cid, Input: in, Output: out, Call: call, Return: ret})
					mu.Unlock()
				case outUnknown:
					if in.kind == "get" {
						continue
					}
					mu.Lock()
					ops = append(ops, porcupine.Operation{ClientId: cid, Input: in, Output: ttlOutput{unknown: true}, Call: call, Return: 1 << 62})
					mu.Unlock()
					cid++ // its write stays pending: the next call is another client's
				case outInvalid:
					t.Errorf("%+v: %v", in, err)
					return
				}
			}
		}(w)
	}
	env := &nemesisEnv{c: c, admin: admin, keys: keys, deadline: deadline, rng: rand.New(rand.NewPCG(seed, 99)),
		logf: func(f string, a ...any) { t.Logf(f, a...) }}
	kills, err := killLeaders(env)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := porcupine.CheckOperationsVerbose(ttlModel, ops, time.Minute)
	t.Logf("porcupine: %s on %d operations with %d leader kills", res, len(ops), kills)
	if res != porcupine.Ok {
		t.Fatalf("history is not linearizable under the model with time")
	}
}
