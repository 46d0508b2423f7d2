package ycsb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/expiry"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
	"github.com/shoaldb/shoal/test/testcluster"
)

// TestTTLBench measures expiry on an in-process three-node cluster: how soon the sweepers remove N
// keys with random TTLs (each must be gone within twice its TTL), and YCSB B's throughput with the
// TTL-heavy variant (shoal.ttl) with the sweepers on and off. A benchmark, not a test: it runs only
// with SHOAL_BENCH_TTL=1; SHOAL_BENCH_TTL_KEYS sets N (default 200000).
func TestTTLBench(t *testing.T) {
	if os.Getenv("SHOAL_BENCH_TTL") == "" {
		t.Skip("a benchmark: set SHOAL_BENCH_TTL=1")
	}
	t.Run("sweep", benchSweep)
	t.Run("ycsb-b", benchSweepCost)
}

func benchSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SHOAL_BENCH_TTL_KEYS"))
	if n <= 0 {
		n = 200000
	}
	const minTTL, maxTTL = 20 * time.Second, 60 * time.Second
	c := testcluster.Start(t, testcluster.Options{Nodes: 3})
	cl := c.Client()
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
	ctx := context.Background()
	expireAt := make([]int64, n) // Unix ms
	deadline := make([]int64, n) // written + 2 ttl
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		var muts []*pb.Mutation
		now := time.Now().UnixMilli()
		for j := i; j < min(i+1000, n); j++ {
			ttl := minTTL + rand.N(maxTTL-minTTL)
			expireAt[j], deadline[j] = now+ttl.Milliseconds(), now+2*ttl.Milliseconds()
			muts = append(muts, &pb.Mutation{Key: fmt.Appendf(nil, "ttl/%08d", j), Value: []byte("0123456789abcdef"), ExpireAtUnixMs: expireAt[j]})
		}
		if err := cl.WriteMany(ctx, muts); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d keys with TTLs in [%v, %v) in %v", n, minTTL, maxTTL, time.Since(start).Round(time.Millisecond))
	var maxLag, late int64
	for {
		time.Sleep(2 * time.Second) // a look at every key costs a core-second per million: not more often
		now := time.Now().UnixMilli()
		lo, hi := storage.DataSpan(false, []byte("ttl/"), []byte("ttl0"))
		it, err := c.Nodes[0].Eng.NewIter(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for ok := it.First(); ok; ok = it.Next() {
			left++
			i, _ := strconv.Atoi(string(storage.StripDataPrefix(it.Key())[4:]))
			if v, _ := stored.Decode(it.Value()); v.ExpireAtMs != 0 && now > expireAt[i] {
				maxLag = max(maxLag, now-expireAt[i])
				if now > deadline[i] {
					late++
				}
			}
		}
		it.Close()
		if left == 0 || time.Since(start) > 2*maxTTL+30*time.Second {
			var del uint64
			for _, nd := range c.Nodes {
				del += nd.Node.ExpiryStats().Deleted
			}
			t.Logf("after %v: %d keys left, %d deleted by the sweepers; oldest expired key still stored %dms past its expiry; %d key-samples past 2x TTL",
				time.Since(start).Round(time.Second), left, del, maxLag, late)
			if left > 0 || late > 0 {
				t.Errorf("keys not swept within twice their TTL")
			}
			return
		}
	}
}

func benchSweepCost(t *testing.T) {
	for round := 0; round < 3; round++ {
		// The order alternates: the machine's other load drifts, and a fixed order would favour one side.
		for _, off := range [][]bool{{false, true}, {true, false}}[round%2] {
			c := testcluster.Start(t, testcluster.Options{Nodes: 3, Node: node.Config{Expiry: expiry.Config{Off: off}}})
			cl := c.Client()
			testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return c.FullyReplicated(cl, 3) })
			cfg := Config{Workload: "b", Target: TargetGRPC, Hosts: c.Addrs(), Records: 20000, Ops: 1 << 40, Threads: 16, Load: true,
				MaxDuration: 30 * time.Second, Props: map[string]string{PropShoalTTL: "20s"}, AbortAfterFailures: 1 << 40}
			p, err := cfg.Properties()
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), cfg, NewShoalDB(c.Client(), p))
			if err != nil {
				t.Fatal(err)
			}
			var del uint64
			for _, nd := range c.Nodes {
				del += nd.Node.ExpiryStats().Deleted
			}
			t.Logf("round %d sweeper off=%v: %.0f ops/s, read p99 %.2fms, %d errors (expired records), %d swept",
				round, off, rep.Throughput, rep.Operations["READ"].P99Ms, rep.Errors, del)
			c.Stop()
		}
	}
}
