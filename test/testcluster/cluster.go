// Package testcluster starts real Shoal nodes inside the test process — each with its own Pebble
// engine in a temporary directory and its own gRPC server on a random loopback port — so tests can
// kill, restart and inspect them. It must never be imported by non-test code.
package testcluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/storage"
)

// Node is one in-process node.
type Node struct {
	Index int
	Dir   string
	Addr  string
	Eng   *storage.Engine
	Node  *node.Node
	srv   *grpc.Server
	lis   net.Listener
	alive bool
}

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
	cfg   node.Config
	// perNode is Options.PerNode.
	perNode func(i int, cfg *node.Config)
	// droppedInvalid sums, over the nodes' lives so far, the raft messages they dropped as invalid.
	droppedInvalid atomic.Uint64
}

// Options tunes the cluster.
type Options struct {
	Nodes int
	// Node is a template for each node's configuration (DataDir, Addr, Bootstrap and Join are filled
	// in; the block cache is 16 MiB unless set).
	Node node.Config
	// PerNode, when set, adjusts node i's (from 0) configuration before it starts (its locality).
	PerNode func(i int, cfg *node.Config)
}

// Start starts opts.Nodes nodes: the first bootstraps, the rest join it.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	// Faster than production: tests wait for heartbeats, queues and elections.
	if opts.Node.HeartbeatInterval == 0 {
		opts.Node.HeartbeatInterval = 200 * time.Millisecond
	}
	if opts.Node.KV.QueueInterval == 0 {
		opts.Node.KV.QueueInterval = 300 * time.Millisecond
	}
	if opts.Node.Raft.TickInterval == 0 {
		opts.Node.Raft.TickInterval = 50 * time.Millisecond
	}
	if opts.Node.Storage.CacheBytes == 0 {
		opts.Node.Storage.CacheBytes = 16 << 20
	}
	c := &Cluster{t: t, cfg: opts.Node, perNode: opts.PerNode}
	base := t.TempDir()
	for i := 0; i < opts.Nodes; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := &Node{Index: i, Dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), Addr: lis.Addr().String(), lis: lis}
		c.Nodes = append(c.Nodes, n)
		if err := c.startNode(n, i == 0, true); err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
	}
	t.Cleanup(c.stopAndCheck)
	return c
}

// countDropped adds node n's invalid-message count to the cluster's before n stops (a restart starts
// a new count).
func (c *Cluster) countDropped(n *Node) {
	c.droppedInvalid.Add(n.Node.Store().LoopStats().DroppedInvalid)
}

// stopAndCheck stops every node and fails the test if a node dropped a raft message as invalid: no
// correct peer sends one, so every test that starts a cluster checks the raft layer's messages too.
func (c *Cluster) stopAndCheck() {
	c.Stop()
	if d := c.droppedInvalid.Load(); d > 0 {
		c.t.Errorf("nodes dropped %d raft messages as invalid (see the 'dropping invalid raft message' log lines): a raft-layer bug", d)
	}
}

func (c *Cluster) startNode(n *Node, bootstrap, create bool) error {
	cfg := c.cfg
	cfg.Bootstrap = bootstrap
	if !bootstrap {
		cfg.Join = []string{c.Nodes[0].Addr}
	}
	cfg.DataDir, cfg.Addr = n.Dir, n.Addr
	cfg.Storage.CreateIfMissing = create
	if c.perNode != nil {
		c.perNode(n.Index, &cfg)
	}
	nd, err := node.StartServing(context.Background(), cfg, n.lis)
	if err != nil {
		return err
	}
	n.Eng, n.Node, n.srv, n.alive = nd.Engine(), nd, nd.Server(), true
	return nil
}

// Kill stops node i abruptly (as far as one process allows): the gRPC server is cut, the node's
// goroutines are stopped and the engine closed, with no graceful handoff.
func (c *Cluster) Kill(i int) {
	n := c.Nodes[i]
	if !n.alive {
		return
	}
	n.srv.Stop()
	c.countDropped(n)
	n.Node.Stop()
	n.Eng.Close()
	n.lis = nil
	n.alive = false
}

// Restart starts a killed node again from its data directory.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.startNode(c.Nodes[i], false, false); err != nil {
		c.t.Fatalf("restart node %d: %v", i+1, err)
	}
}

// Alive reports whether node i runs.
func (c *Cluster) Alive(i int) bool { return c.Nodes[i].alive }

// Stop stops every node.
func (c *Cluster) Stop() {
	for i := range c.Nodes {
		c.Kill(i)
	}
}

// Addrs lists the addresses of live nodes.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		if n.alive {
			out = append(out, n.Addr)
		}
	}
	return out
}

// Client returns a client connected to every node (closed at test end).
func (c *Cluster) Client() *client.Client {
	c.t.Helper()
	var all []string
	for _, n := range c.Nodes {
		all = append(all, n.Addr)
	}
	cl, err := client.New(context.Background(), client.Config{Addrs: all, RequestTimeout: 10 * time.Second, MaxAttempts: 40})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// WaitFor polls cond every 50ms until it holds or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// FullyReplicated reports whether every range has want voters, no learners, and a leader.
func (c *Cluster) FullyReplicated(cl *client.Client, want int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	rs, err := cl.Ranges(ctx)
	if err != nil || len(rs) == 0 {
		return false
	}
	for _, r := range rs {
		voters := 0
		for _, rd := range r.Desc.Replicas {
			if rd.Learner {
				return false
			}
			voters++
		}
		if voters != want || r.LeaderNodeId == 0 {
			return false
		}
	}
	return true
}
