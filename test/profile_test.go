package test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/supervisor"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/test/testcluster"
)

// startSupervised starts n nodes, each under a supervisor (node/supervisor), with a 32 MiB memory
// budget the engine profiles divide; the first bootstraps, the others join it.
func startSupervised(t *testing.T, n int) ([]*supervisor.Supervisor, []string) {
	t.Helper()
	base := t.TempDir()
	var sups []*supervisor.Supervisor
	var addrs []string
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := node.Config{DataDir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Addr: lis.Addr().String(),
			HeartbeatInterval: 200 * time.Millisecond, Bootstrap: i == 0}
		cfg.KV.QueueInterval = 300 * time.Millisecond
		cfg.Raft.TickInterval = 50 * time.Millisecond
		cfg.Storage.MemoryBytes = 32 << 20
		if i > 0 {
			cfg.Join = []string{addrs[0]}
		}
		s, err := supervisor.Start(context.Background(), cfg, lis)
		if err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
		t.Cleanup(s.Stop)
		sups, addrs = append(sups, s), append(addrs, cfg.Addr)
	}
	return sups, addrs
}

// startSupervisedHeld starts three supervised nodes and a client, waits for three voters on every
// range and holds the autopilot's placement policies, so that only the test moves leaderships.
func startSupervisedHeld(t *testing.T, ctx context.Context) ([]*supervisor.Supervisor, []string, *client.Client) {
	t.Helper()
	sups, addrs := startSupervised(t, 3)
	cl, err := client.New(context.Background(), client.Config{Addrs: addrs, RequestTimeout: 10 * time.Second, MaxAttempts: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	testcluster.WaitFor(t, 60*time.Second, "3 voters on every range", func() bool { return benchutil.FullyReplicated(ctx, cl, 3) })
	testcluster.Hold(t, ctx, cl)
	return sups, addrs, cl
}

// TestProfileChangeByRollingRestart: a node asked to change its engine profile (the SetProfile
// RPC the autopilot's actuator sends) sheds its leaderships, reopens its engine with the profile on
// the same data, and takes its leaderships back; its data is intact, its heartbeats report the
// profile, and a writer running all along sees no failed request.
func TestProfileChangeByRollingRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sups, addrs, cl := startSupervisedHeld(t, ctx)

	// Four ranges; the target node leads two of them.
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, _, err := cl.Split(ctx, []byte(k)); err != nil {
			t.Fatalf("split at %s: %v", k, err)
		}
	}
	target := sups[1].Node()
	id := target.NodeID()
	for _, k := range []string{"k0", "k2"} {
		rs, err := testcluster.RangeOf(ctx, cl, []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.TransferLeader(ctx, rs.Desc.RangeId, id); err != nil {
			t.Fatalf("transfer r%d to n%d: %v", rs.Desc.RangeId, id, err)
		}
	}
	// The meta range's leadership is not taken back (the autopilot would move again).
	led := slices.DeleteFunc(target.LedRanges(), func(id uint64) bool { return id == 1 })
	if len(led) < 2 {
		t.Fatalf("n%d leads %v, want at least two ranges", id, led)
	}
	for i := range 400 {
		if err := cl.Put(ctx, []byte(fmt.Sprintf("k%d-%03d", i%4, i)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}

	// Four writers, each reading too, run through the change; every request must succeed. Several
	// at once keep writes in flight on the node as it sheds its ranges and stops: one it proposed as
	// leader must be answered, not failed "ambiguous: node stopping".
	var wg sync.WaitGroup
	var failed atomic.Int64
	var written atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	for w := range 4 {
		wg.Go(func() { writeAndRead(wctx, t, cl, w, &written, &failed) })
	}
	time.Sleep(500 * time.Millisecond)

	// The autopilot's path: the SetProfile RPC on the node itself.
	cc, err := grpc.NewClient(addrs[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := pb.NewShoalClient(cc).SetProfile(ctx, &pb.SetProfileRequest{NodeId: id, Profile: "scan"})
	if err != nil || resp.Error != nil || !resp.Accepted || resp.Current != storage.ProfileDefault {
		t.Fatalf("set profile: %v, %v", resp, err)
	}
	testcluster.WaitFor(t, 90*time.Second, "the profile change", func() bool { return sups[1].Restarts() == 1 || sups[1].LastError() != "" })
	if e := sups[1].LastError(); e != "" {
		t.Fatalf("profile change failed: %s", e)
	}
	time.Sleep(time.Second) // the writer goes on against the restarted node
	stop()
	wg.Wait()

	now := sups[1].Node()
	if now == target || now.NodeID() != id {
		t.Fatalf("node after the change: %p (n%d), before %p (n%d)", now, now.NodeID(), target, id)
	}
	// The profile's options: 55 % of the 32 MiB budget for the block cache's blocks, with the two
	// memtables (10 % of it) Pebble charges to the cache on top; 128 KiB blocks.
	budget := 32 << 20
	wantMem := uint64(0.10 * float64(budget) / 2)
	wantCache := int64(0.55*float64(budget)) + 2*int64(wantMem)
	if p, so := now.Engine().Profile(), now.Config().Storage; p != "scan" || so.CacheBytes != wantCache || so.MemTableBytes != wantMem || so.BlockBytes != 128<<10 {
		t.Fatalf("engine profile %q, cache %d, block size %d; want scan, %d, %d", p, so.CacheBytes, so.BlockBytes, wantCache, 128<<10)
	}
	for _, r := range led {
		if !slices.Contains(now.LedRanges(), r) {
			t.Errorf("n%d led r%d before the change, not after: leads %v", id, r, now.LedRanges())
		}
	}
	testcluster.WaitFor(t, 10*time.Second, "admin nodes to show the profile", func() bool {
		ns, err := cl.Nodes(ctx)
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.GetDesc().GetNodeId() == id {
				return n.GetStats().GetProfile() == "scan"
			}
		}
		return false
	})
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d requests failed during the change (of %d written)", f, written.Load())
	}
	// Data intact: the ranges the node leads again are read from its reopened engine.
	for i := range 400 {
		k := fmt.Sprintf("k%d-%03d", i%4, i)
		v, found, err := cl.Get(ctx, []byte(k))
		if err != nil || !found || string(v) != fmt.Sprint(i) {
			t.Fatalf("get %s after the change: %q, found %v, %v", k, v, found, err)
		}
	}
	n := written.Load()
	if n == 0 {
		t.Fatal("the writer wrote nothing")
	}
	t.Logf("writer: %d writes and reads during the change, none failed", n)

	// Asking again for the profile it runs changes nothing.
	resp, err = pb.NewShoalClient(cc).SetProfile(ctx, &pb.SetProfileRequest{NodeId: id, Profile: "scan"})
	if err != nil || resp.Error != nil || resp.Accepted || resp.Current != "scan" {
		t.Fatalf("set the same profile again: %v, %v", resp, err)
	}
	if resp, err = pb.NewShoalClient(cc).SetProfile(ctx, &pb.SetProfileRequest{NodeId: id, Profile: "fast"}); err != nil || resp.Error == nil {
		t.Fatalf("an unknown profile was not refused: %v, %v", resp, err)
	}
}

// writeAndRead is writer w of TestProfileChangeByRollingRestart: puts of fresh keys, each followed
// by a get of a loaded one, until ctx ends, counting what it wrote and what failed.
func writeAndRead(ctx context.Context, t *testing.T, cl *client.Client, w int, written, failed *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		k := []byte(fmt.Sprintf("k%d-w%d-%05d", i%4, w, i))
		if err := cl.Put(ctx, k, []byte(fmt.Sprint(i))); err != nil {
			if ctx.Err() == nil {
				failed.Add(1)
				t.Logf("put %s: %v", k, err)
			}
			continue
		}
		if _, found, err := cl.Get(ctx, []byte(fmt.Sprintf("k%d-%03d", i%4, i%400))); (err != nil || !found) && ctx.Err() == nil {
			failed.Add(1)
			t.Logf("get: found %v, %v", found, err)
		}
		written.Add(1)
	}
}
