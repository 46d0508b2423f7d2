package node

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage"
)

// TestDrainLeadershipsAloneReturnsAtOnce: a single node has nowhere to move its leaderships, so its
// drain on shutdown returns at once (Ctrl-C on a one-node cluster stops it without a wait).
func TestDrainLeadershipsAloneReturnsAtOnce(t *testing.T) {
	nd := startBootstrapped(t)
	leaders := func() int {
		n := 0
		for _, r := range nd.Store().Replicas() {
			if r.IsLeader() {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); leaders() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node leads no range 10s after it started")
		}
	}
	// At once: long before the drain's deadline, which a drain that waits for a place would reach.
	const deadline = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	left := nd.DrainLeaderships(ctx)
	if took := time.Since(start); took > deadline/3 || ctx.Err() != nil || left == 0 {
		t.Fatalf("DrainLeaderships = %d after %v; want the node's leaderships left, at once", left, took)
	}
}

// TestDrainLeadershipsAllStopping: nodes that stop together do not hand their leaderships back and
// forth until the drain's deadline; once each sees the others draining, there is nowhere to go.
func TestDrainLeadershipsAllStopping(t *testing.T) {
	start := func(join []string) *Node {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd, err := StartServing(context.Background(), Config{DataDir: t.TempDir(), Addr: lis.Addr().String(), Bootstrap: join == nil,
			Join: join, Storage: storage.Options{CacheBytes: 8 << 20, MemTableBytes: 1 << 20}}, lis)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Kill)
		return nd
	}
	n1 := start(nil)
	n2 := start([]string{n1.cfg.Addr})
	// Wait until some range has voters on both nodes, so that a leadership has somewhere to go.
	shared := func() bool {
		for _, r := range n1.Store().Replicas() {
			if d := r.Desc(); d != nil && len(d.Replicas) == 2 && !d.Replicas[0].Learner && !d.Replicas[1].Learner && r.IsLeader() {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !shared(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no range with voters on both nodes led by node 1 after 30s")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	began := time.Now()
	done := make(chan time.Duration, 2)
	for _, nd := range []*Node{n1, n2} {
		go func() {
			nd.DrainLeaderships(ctx)
			done <- time.Since(began)
		}()
	}
	for range 2 {
		took := <-done
		t.Logf("drain took %v", took)
		if took > 10*time.Second {
			t.Errorf("a drain of nodes stopping together took %v", took)
		}
	}
}

// startBootstrapped starts one bootstrapped node serving on a free loopback port, killed at the
// test's end.
func startBootstrapped(t *testing.T) *Node {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nd, err := StartServing(context.Background(), Config{DataDir: t.TempDir(), Addr: lis.Addr().String(), Bootstrap: true,
		Storage: storage.Options{CacheBytes: 8 << 20, MemTableBytes: 1 << 20}}, lis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nd.Kill)
	return nd
}
